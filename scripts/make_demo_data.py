"""Build the bundled demo frame and abstracts from real OpenAlex works plus the seed record.

Writes labeling/data/demo_frame.jsonl.gz (one seed-shaped record per OpenAlex work in
tests/fixtures/openalex, with its real bibliographic fields and a synthetic, seeded machine
side from labeling.frames.synth_scores, then the seed record verbatim) and
labeling/data/demo_abstracts.json ({work_id: de-inverted abstract or null}). Running it twice
gives identical bytes.

Choices made for the demo (the fixtures are real; the machine side is not):
- the machine side comes from labeling.frames.synth_scores (model_version "demo-synth-v1"); works
  whose
  titles are plainly about research, science, publishing or bibliometrics get the scores in
  BOOSTS (by hand, codex vs gemma); other works have their category scores and machine
  scores damped so that they rank below them, binary (about Canada) scores are damped for
  all; bare records (Index, References...) and works without an abstract score high on
  "Insufficient payload"; a boosted work without an abstract (bibliometrix) gets lower
  machine scores, so that the demo queues open on works that have one; OpenAlex types steer
  the genre head (editorial, letter, review);
- routes: ca_aff from CA institutions, ca_fund from Canadian funders, ca_venue from a
  Canadian venue, about_ca when the title or abstract mentions Canada or no other route
  applies (the frame's over-inclusive "about Canada" screen is how such works get in);
- abstracts longer than ABSTRACT_CAP characters are cut at a word and end with " […]", to
  keep the file small; the seed work's abstract is the one its page shows (seeds/003).

Usage: python scripts/make_demo_data.py [--fixtures DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeling.frames.synth_scores import MachineBlock, MachineFields, draw_machine_block  # noqa: E402
from labeling.schema import Schema, load_schema  # noqa: E402
from labeling.settings import DEFAULT_SCHEMA  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "openalex"
OUT_DIR = ROOT / "labeling" / "data"
SEED_RECORD = OUT_DIR / "seed_record.json"
FRAME_NAME = "demo_frame.jsonl.gz"
ABSTRACTS_NAME = "demo_abstracts.json"
MODEL_VERSION = "demo-synth-v1"
RANDOM_SEED = 20_250_601
ABSTRACT_CAP = 3_000
DAMPING = 0.35  # scales binary scores, and category scores of works not in BOOSTS
NO_ABSTRACT_RANK = 0.55  # scales the machine scores of a boosted work that has no abstract
# The seed work's abstract as its page shows it (seeds/003_de4076ee3ce0e0a6.txt).
SEED_ABSTRACT = (
    "The ability to scale out training workloads has been one of the key performance enablers"
    " of deep learning. The main scaling approach is data-parallel GPU-based training, which"
    " has been boosted by hardware and software support for highly efficient point-to-point"
    " communication, and in particular via hardware bandwidth over-provisioning."
    " Overprovisioning comes at a cost: there is an order of magnitude price difference between"
    ' "cloud-grade" servers with such support, relative to their popular "consumer-grade"'
    " counterparts, although single server-grade and consumer-grade GPUs can have similar"
    " computational envelopes."
)
CA_FUNDER = re.compile(r"Canad|NSERC|CIHR|SSHRC|Genome Canada|Mitacs|Fonds de recherche")
BARE_TITLE = re.compile(r"^(Index|References|Foreword|Book Reviews|Preface|Contents)$", re.I)
GENRE_BY_TYPE = {
    "editorial": "editorial",
    "letter": "letter",
    "review": "review",
    "paratext": "genre_other",
}
# (codex, gemma) category scores for works plainly about research, science or publishing.
BOOSTS: dict[str, dict[str, tuple[float, float]]] = {
    # The state of OA: a large-scale analysis of ... Open Access articles
    "W2741809807": {
        "Open science": (0.97, 0.95),
        "Bibliometrics": (0.86, 0.92),
        "Scholarly communication": (0.88, 0.81),
        "Metaresearch": (0.62, 0.41),
    },
    # bibliometrix: An R-tool for comprehensive science mapping analysis
    "W2755950973": {"Bibliometrics": (0.96, 0.98), "Open science": (0.35, 0.52)},
    # Crop improvement in the CGIAR ... open access and international collaboration
    "W2122299184": {"Open science": (0.66, 0.38), "Science and technology studies": (0.58, 0.61)},
    # A web resource for the UK's long-term individual-based time-series (LITS) data
    "W2059915410": {"Open science": (0.71, 0.55), "Scholarly communication": (0.22, 0.31)},
    # Rewarding true innovation (research exemption, gene patenting)
    "W1788105650": {
        "Science and technology studies": (0.64, 0.47),
        "Research integrity": (0.18, 0.27),
    },
    # Taking Conservation Biology to New Levels in Environmental Decision-Making
    "W2160025453": {"Science and technology studies": (0.56, 0.44)},
    # Forest education and research in the United Kingdom
    "W2013849440": {"Science and technology studies": (0.61, 0.52)},
    # Science, funding and participation: key issues for marine protected area networks
    "W2117786730": {"Science and technology studies": (0.47, 0.58)},
    # Science and Conservation in African Forests
    "W49044230": {"Science and technology studies": (0.43, 0.29)},
    # Need for Integrated Research for a Sustainable Future in Tropical Dry Forests
    "W2004242077": {"Metaresearch": (0.31, 0.52), "Science and technology studies": (0.42, 0.36)},
    # Preaching to the Unconverted (science and policy)
    "W4250078337": {"Science and technology studies": (0.38, 0.22)},
    # A warm welcome to the MCD Journal
    "W1535527254": {"Scholarly communication": (0.74, 0.66)},
    # Valuing Research leads: Bioprospecting ... (two records of one paper; the teachers split)
    "W3122364323": {"Metaresearch": (0.41, 0.09)},
    "W2171769921": {"Metaresearch": (0.12, 0.35)},
    # Nematode systematics: past, present and future
    "W2003557986": {"Science and technology studies": (0.27, 0.33)},
    # "A systematic approach to ... oral mucositis" (its abstract is about Natura 2000)
    "W2076031027": {"Meta-epidemiology (broad)": (0.34, 0.08)},
    # 18-19 November 2008 Washington, D.C (board minutes of a scientific society)
    "W1972656833": {
        "Insufficient payload (model declined to judge)": (0.58, 0.72),
        "Scholarly communication": (0.2, 0.1),
    },
}
DESIGNS = {
    "W2741809807": ("bibliometric_analysis", "empirical"),
    "W2755950973": ("tool_or_dataset", "tool_or_software"),
    "W2059915410": ("tool_or_dataset", "tool_or_software"),
    "W1972656833": ("design_other", "genre_other"),
    "W1535527254": ("design_other", "editorial"),
}


def deinvert(index: dict[str, list[int]] | None) -> str | None:
    """The abstract text of an OpenAlex inverted index: words by position, single spaces."""
    if index is None:
        return None
    pairs = sorted((pos, word) for word, positions in index.items() for pos in positions)
    return " ".join(word for _, word in pairs)


def cap(text: str | None) -> str | None:
    """The text, cut at a word before ABSTRACT_CAP characters with " […]" when longer."""
    if text is None or len(text) <= ABSTRACT_CAP:
        return text
    return text[:ABSTRACT_CAP].rsplit(" ", 1)[0] + " […]"


def _strip(value: str | None, prefix: str) -> str | None:
    """The value without a URL prefix (None stays None)."""
    return value[len(prefix) :] if value and value.startswith(prefix) else value


def _unique(names: list[str]) -> str:
    """Names in first-seen order, without repeats, joined with '; '."""
    return "; ".join(dict.fromkeys(n for n in names if n))


def bibliographic(work: dict[str, Any], abstract: str | None) -> dict[str, Any]:
    """The seed-shaped bibliographic part of a record, from one OpenAlex work."""
    topic = work.get("primary_topic") or {}
    source = (work.get("primary_location") or {}).get("source") or {}
    institutions = [
        inst.get("display_name") or ""
        for authorship in work.get("authorships") or []
        for inst in authorship.get("institutions") or []
        if inst.get("country_code") == "CA"
    ]
    funder_names = [g.get("funder_display_name") or "" for g in work.get("grants") or []]
    funder_names += [f.get("display_name") or "" for f in work.get("funders") or []]
    funders = _unique(funder_names)
    venue = source.get("display_name") or ""
    ca_aff, ca_fund = bool(institutions), bool(CA_FUNDER.search(funders))
    ca_venue = "Canad" in venue
    mentions_ca = "Canad" in f"{work.get('title') or ''} {abstract or ''}"
    return {
        "id": _strip(work["id"], "https://openalex.org/"),
        "doi": _strip(work.get("doi"), "https://doi.org/"),
        "title": work.get("title") or work.get("display_name") or "",
        "year": work.get("publication_year"),
        "lang": work.get("language"),
        "type": work.get("type"),
        "venue": venue,
        "topic": topic.get("display_name") or "",
        "field": (topic.get("field") or {}).get("display_name") or "",
        "cited_by": work.get("cited_by_count") or 0,
        "is_retracted": bool(work.get("is_retracted")),
        "has_abstract": work.get("abstract_inverted_index") is not None,
        "ca_institutions": _unique(institutions),
        "funders": funders,
        "keywords": _unique([k.get("display_name") or "" for k in work.get("keywords") or []]),
        "routes": {
            "ca_aff": ca_aff,
            "ca_fund": ca_fund,
            "ca_venue": ca_venue,
            "about_ca": mentions_ca or not (ca_aff or ca_fund or ca_venue),
            "invisible_to_affiliation_only": not ca_aff,
        },
        "retraction": None,
        "screen": None,
        "direct_labels": [],
    }


def _steer(vec: np.ndarray, index: int, weight: float) -> None:
    """Move a probability vector towards one label, in place (it still sums to 1)."""
    vec *= 1.0 - weight
    vec[index] += weight


def shape_machine(block: MachineBlock, records: list[dict], schema: Schema, rng: Any) -> None:
    """Adjust the drawn scores so that the demo's top works are the plausible ones."""
    cats = schema.question("categories")
    multi_binary = [q for q in schema.questions if q.kind in ("multi", "binary")]
    payload = cats.labels.index("Insufficient payload (model declined to judge)")
    for i, rec in enumerate(records):
        boost = BOOSTS.get(rec["id"], {})
        for q in multi_binary:  # none of these works is about Canada: binary scores stay low
            if q.kind == "binary" or not boost:
                for path in q.scores.values():
                    block.scores[path][i] *= DAMPING
        if not boost:
            block.score_opus[i] *= 0.5
            block.score_gpt[i] *= 0.5
        if BARE_TITLE.match(rec["title"]):
            boost = {**boost, cats.labels[payload]: (0.91, 0.86)}
        elif not rec["has_abstract"] and not boost:
            boost = {cats.labels[payload]: (0.62, 0.55)}
        for label, pair in boost.items():
            j = cats.labels.index(label)
            for teacher, target in zip(schema.teachers[:2], pair, strict=True):
                jitter = rng.normal(0.0, 0.015)
                block.scores[cats.scores[teacher]][i, j] = float(np.clip(target + jitter, 0, 1))
        meta = [v for k, v in boost.items() if cats.labels.index(k) != payload]
        if meta:
            top = np.max(meta, axis=0)
            block.score_opus[i] = float(np.clip(top[0] + rng.normal(0, 0.03), 0, 1))
            block.score_gpt[i] = float(np.clip(top[1] + rng.normal(0, 0.05), 0, 1))
            if not rec["has_abstract"]:  # a title alone: ranked below the works one can judge
                block.score_opus[i] *= NO_ABSTRACT_RANK
                block.score_gpt[i] *= NO_ABSTRACT_RANK
        design, genre = DESIGNS.get(rec["id"], (None, GENRE_BY_TYPE.get(rec["type"] or "")))
        for name, label in (("study_design", design), ("genre", genre)):
            if label:
                q = schema.question(name)
                for path in q.scores.values():
                    _steer(block.scores[path][i], q.labels.index(label), 0.8)
    block.inconsistent[:] = False  # the seed record already shows an inconsistent call


def load_works(fixtures: Path) -> list[dict[str, Any]]:
    """All OpenAlex works of the fixture pages, in file order, first copy of each id."""
    works: dict[str, dict[str, Any]] = {}
    for page in sorted(fixtures.glob("*.json")):
        for work in json.loads(page.read_text(encoding="utf-8"))["results"]:
            works.setdefault(work["id"], work)
    return list(works.values())


def build(fixtures: Path = FIXTURES, out_dir: Path = OUT_DIR) -> tuple[Path, Path]:
    """Write the demo frame and abstracts files; return their paths.

    Args:
        fixtures: directory of OpenAlex list responses (*.json with "results").
        out_dir: where the two files go.
    """
    schema = load_schema(DEFAULT_SCHEMA)
    works = load_works(fixtures)
    abstracts = {w["id"]: deinvert(w.get("abstract_inverted_index")) for w in works}
    records = [bibliographic(w, abstracts[w["id"]]) for w in works]
    rng = np.random.default_rng(RANDOM_SEED)
    block = draw_machine_block(rng, len(records), schema)
    shape_machine(block, records, schema, rng)
    fields = MachineFields(block, schema, MODEL_VERSION)
    lines = [orjson.dumps(fields.complete(rec, i)) for i, rec in enumerate(records)]
    seed_line = SEED_RECORD.read_bytes().strip()
    seed_id = orjson.loads(seed_line)["id"]
    lines.append(seed_line)
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = out_dir / FRAME_NAME
    with (
        frame.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
    ):
        gz.write(b"\n".join(lines) + b"\n")
    texts = {rec["id"]: cap(abstracts[w["id"]]) for rec, w in zip(records, works, strict=True)}
    texts[seed_id] = SEED_ABSTRACT
    target = out_dir / ABSTRACTS_NAME
    target.write_text(json.dumps(texts, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    return frame, target


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point.

    Args:
        argv: arguments (default: sys.argv[1:]).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--fixtures", type=Path, default=FIXTURES)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    for path in build(args.fixtures, args.out):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
