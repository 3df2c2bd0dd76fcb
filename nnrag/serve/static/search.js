// Live results: the form still works without scripts (the server renders results for ?q=...).
(() => {
  const form = document.getElementById("search");
  const list = document.getElementById("results");
  const status = document.getElementById("status");
  let timer = null, asked = 0;

  const el = (tag, attrs = {}, text = "") => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text) node.textContent = text;
    return node;
  };

  // a block's status: [CSS class, sign, words], as the page was given them (MARKS in app.py)
  const MARKS = JSON.parse(document.getElementById("marks").textContent);

  function render(hits) {
    list.replaceChildren(...hits.map((h) => {
      const li = el("li", { class: "hit", "data-id": h.id });
      const line = el("div", { class: "line1" });
      line.append(el("a", { class: "name", href: "/block/" + encodeURIComponent(h.id) }, h.name), " ",
        el("span", { class: "mark " + MARKS[h.status][0], title: MARKS[h.status][2] }, MARKS[h.status][1]),
        el("span", { class: "source" }, h.source));
      if (h.category) line.append(" ", el("span", { class: "tag" }, h.category));
      line.append(el("span", { class: "score" }, h.score.toFixed(3)));
      const where = h.path + ":" + h.line + (h.also_in.length ? " · copies in " + h.also_in.join(", ") : "")
        + (h.same_name.length ? " · other " + h.name + ": " + h.same_name.join(", ") : "");
      li.append(line, el("div", { class: "summary" }, h.summary), el("div", { class: "where" }, where));
      return li;
    }));
  }

  async function run() {
    const params = new URLSearchParams(new FormData(form));
    history.replaceState(null, "", "/?" + params);
    if (!params.get("q").trim()) { list.replaceChildren(); status.textContent = "Describe what a block does; results follow as you type."; return; }
    params.set("k", "20");
    const mine = ++asked;
    status.textContent = "searching…";
    try {
      const response = await fetch("/api/search?" + params);
      const body = await response.json();
      if (mine !== asked) return;  // a newer query is on its way
      if (!response.ok) { status.textContent = body.error; return; }
      render(body.results);
      status.textContent = body.results.length + " results";
    } catch (e) {
      if (mine === asked) status.textContent = "search failed: " + e;
    }
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); run(); });
  form.querySelector("#q").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(run, 200); });
  for (const id of ["source", "category", "state"]) form.querySelector("#" + id).addEventListener("change", run);
})();
