// agentbox console: the little the pages need beyond HTML. No framework, nothing inline (the
// Content-Security-Policy allows only this file).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // A page reached after a change says what was done once (?done=...); a reload should not.
  const url = new URL(location.href);
  if (url.searchParams.has("done")) {
    url.searchParams.delete("done");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }

  // Sessions page: refresh the table every 5 s while the box is ticked (remembered per tab).
  const box = document.getElementById("autorefresh");
  if (box) {
    box.checked = sessionStorage.getItem("agentbox.autorefresh") === "1";
    let timer = null;
    const refresh = async () => {
      try {
        const res = await fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } });
        if (!res.ok || res.redirected) { location.reload(); return; }
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        for (const id of ["sessions-wrap", "sessions-count"]) {
          const now = document.getElementById(id), fresh = doc.getElementById(id);
          if (now && fresh) now.replaceWith(fresh);
        }
      } catch (e) { /* the daemon may be restarting: try again at the next tick */ }
    };
    box.addEventListener("change", () => {
      sessionStorage.setItem("agentbox.autorefresh", box.checked ? "1" : "0");
      if (timer) { clearInterval(timer); timer = null; }
      if (box.checked) timer = setInterval(refresh, 5000);
    });
    if (box.checked) timer = setInterval(refresh, 5000);
  }

  // Forms that ask before they change something (rewind, fork): data-confirm holds the question.
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (ev) => {
      if (!window.confirm(form.dataset.confirm)) ev.preventDefault();
    });
  }

  // Long code and output blocks fold; a button unfolds them.
  for (const pre of document.querySelectorAll("pre.fold")) {
    if (pre.scrollHeight <= pre.clientHeight + 4) continue;
    const more = document.createElement("button");
    more.type = "button";
    more.className = "more";
    more.textContent = "Show all";
    more.addEventListener("click", () => { pre.classList.toggle("open"); more.textContent = pre.classList.contains("open") ? "Show less" : "Show all"; });
    pre.after(more);
  }
});
