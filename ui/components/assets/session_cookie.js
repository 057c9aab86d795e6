// The login cookie, written from the page: Streamlit 1.67 has no server-side way to set a
// cookie from a script run. SameSite=Strict, Path=/, Secure when the page came over https;
// Max-Age is the idle limit, renewed whenever the server marks the session used. A clear also
// forgets the unsaved answers the signed-out user left in this browser.
import { dropDraftsOf } from "./drafts.js";

const NAME = /^[A-Za-z0-9_]{1,64}$/;
const VALUE = /^[A-Za-z0-9_-]{1,128}$/;

export default function render({ data }) {
  if (!data || typeof data.name !== "string" || !NAME.test(data.name)) return;
  const attrs = `; Path=/; SameSite=Strict${window.location.protocol === "https:" ? "; Secure" : ""}`;
  if (data.op === "set" && typeof data.value === "string" && VALUE.test(data.value)) {
    const age = Math.max(0, Math.floor(Number(data.max_age) || 0));
    document.cookie = `${data.name}=${data.value}; Max-Age=${age}${attrs}`;
  } else if (data.op === "clear") {
    document.cookie = `${data.name}=; Max-Age=0${attrs}`;
    if (Number.isInteger(data.drafts_of)) dropDraftsOf(data.drafts_of);
  }
}
