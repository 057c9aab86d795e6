"""`labeling history`: what happened to a work's human side, act by act."""

from __future__ import annotations

from typing import Any

import click

from labeling.cli.context import Context, echo_json


def register(main: click.Group) -> None:
    """Attach history to the main group."""
    main.add_command(history_cmd)


@click.command("history")
@click.argument("work_ids", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print every work's history as JSON.")
@click.pass_obj
def history_cmd(obj: Context, work_ids: tuple[str, ...], as_json: bool) -> None:
    """A work's status, validated answers and every act that changed or confirmed them
    (rule verdicts, adjudications, reopens, gold marks, other campaigns' verdicts); an
    unknown work id exits 2."""
    from labeling.review.history import work_history

    records = [work_history(obj.engine, wid.strip().upper()) for wid in work_ids]
    if as_json:
        echo_json(records if len(records) > 1 else records[0])
        return
    for i, record in enumerate(records):
        if i:
            click.echo("")
        for line in history_lines(record):
            click.echo(line)


def _changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """The questions whose validated answer an event changed, as "q: old -> new"."""
    from labeling.review.disputes import fmt_answer  # pandas: imported when a history prints

    before, after = before or {}, after or {}
    return [
        f"{q}: {fmt_answer(before.get(q))} -> {fmt_answer(after.get(q))}"
        for q in dict.fromkeys([*before, *after])
        if before.get(q) != after.get(q)
    ]


def history_lines(record: dict[str, Any]) -> list[str]:
    """A work's history as the text mode prints it."""
    from labeling.review.disputes import fmt_answer

    gold = ", gold" if record["is_gold"] else ""
    via = f" ({record['validated_via']})" if record["validated_via"] else ""
    lines = [f"{record['work_id']}: {record['status']}{via}{gold}"]
    for q, v in (record["final_answers"] or {}).items():
        lines.append(f"  {q}: {fmt_answer(v)}")
    lines.append(f"{len(record['events'])} events:")
    for e in record["events"]:
        who = e["user"] or "(no user: a file import or the model rule)"
        where = f" in campaign {e['campaign']}" if e["campaign"] else ""
        at = (e["at"] or "")[:19].replace("T", " ")
        lines.append(
            f"  {at}  {e['act'] or 'status'}: {e['from_status']} -> {e['to_status']}"
            f" by {who}{where}"
        )
        lines.append(f"    {e['reason']}")
        for change in _changes(e["answers_before"], e["answers_after"]):
            lines.append(f"    {change}")
        if e["via_before"] != e["via_after"] and e["act"] is not None:
            lines.append(f"    validated_via: {e['via_before'] or '—'} -> {e['via_after'] or '—'}")
        if e["gold_before"] != e["gold_after"] and e["act"] is not None:
            lines.append(f"    gold: {e['gold_before']} -> {e['gold_after']}")
    if record["verdicts"]:
        lines.append(f"{len(record['verdicts'])} verdicts of other campaigns:")
    for v in record["verdicts"]:
        state = ""
        if v["outcome"] == "disputed":
            state = (
                f" (settled by {v['settled_by']} at {v['settled_at'][:19]})"
                if v["settled_at"]
                else " (open)"
            )
        differ = f" on {', '.join(v['differing'])}" if v["differing"] else ""
        lines.append(f"  {v['campaign']}: {v['outcome']}{differ}{state}")
    return lines
