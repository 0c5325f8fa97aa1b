// "/" focuses the search box, as on arxiv-sanity-lite; Escape leaves it. Nothing else needs a script.
document.addEventListener("keydown", function (event) {
  const box = document.getElementById("q");
  if (!box) return;
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement && document.activeElement.tagName);
  if (event.key === "/" && !typing) { event.preventDefault(); box.focus(); box.select(); }
  else if (event.key === "Escape" && document.activeElement === box) box.blur();
});
