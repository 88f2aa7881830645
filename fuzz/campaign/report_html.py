"""``report.xml`` (JUnit XML, one test case per target and backend) and ``index.html`` (the
report with plots, self-contained) of a campaign's report (``fuzz.campaign.report``)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from fuzz.campaign import plots
from fuzz.campaign.report import (
    SEEN_HOW,
    UNRUN,
    also_seen_text,
    cell_text,
    matrix,
)
from fuzz.campaign.report_md import hosts_cell, markdown, origin_text, rel_path
from fuzz.files import atomic_write_text
from fuzz.results import maybe_note, size_note


def writers(out: Path, data: dict[str, Any]) -> list[tuple[str, Any]]:
    """(file name, function writing it) of ``report.md``, ``report.xml`` and ``index.html``,
    each written atomically: a caller can go on with the next when one fails."""
    return [
        ("report.md", lambda: atomic_write_text(out / "report.md", markdown(data, out))),
        ("report.xml", lambda: atomic_write_text(out / "report.xml", junit(data))),
        ("index.html", lambda: atomic_write_text(out / "index.html", html_report(data, out))),
    ]


def write_all(out: Path, data: dict[str, Any]) -> None:
    for _, write in writers(out, data):
        write()


# JUnit ---------------------------------------------------------------------------------------------------


def junit(data: dict[str, Any]) -> str:
    """One test case per target and backend: real failures fail, harness errors error, mutants
    pass when found with their expected class and are skipped (with the reason) otherwise."""
    cases = []
    failures = errors = skipped = 0
    for r in data["results"]:
        name = quoteattr(f"{r['target']}[{r['backend']}]")
        cls = quoteattr(f"kernel_fuzz.{r['family']}")
        body = ""
        text = "\n".join(
            f"{f['class']} ({f.get('property')}): {f['message']}\n  reproducer: {f.get('reproducer')}"
            for f in r["findings"]
        )
        if r["error"]:
            errors += 1
            body = f"<error message={quoteattr(r['error'][:500])}/>"
        elif not r["mutant"] and r["findings"]:
            failures += 1
            msg = ", ".join(f["class"] for f in r["findings"])
            body = f'<failure message={quoteattr(msg)} type="kernel-fuzz">{html.escape(text)}</failure>'
        elif r["status"] == UNRUN:
            skipped += 1
            why = "not run: no example ran (the campaign stopped or its budget ran out first)"
            body = f"<skipped message={quoteattr(why)}/>"
        elif r["mutant"] and r["status"] != "found":
            skipped += 1
            why = f"mutant {r['status']}: expected {r['expected_class']}"
            body = f"<skipped message={quoteattr(why)}/>"
        stats = f"{r['examples']} examples, {r['examples_per_second']} ex/s"
        out = f"<system-out>{html.escape(stats)}</system-out>"
        cases.append(
            f'  <testcase classname={cls} name={name} time="{r["seconds"]}">{body}{out}</testcase>'
        )
    if data.get("errors"):  # the campaign itself (no worker could start...)
        errors += 1
        text = "; ".join(data["errors"])
        cases.append(
            '  <testcase classname="kernel_fuzz.campaign" name="harness">'
            f"<error message={quoteattr(text[:500])}>{html.escape(text)}</error></testcase>"
        )
    if data.get("interrupted"):  # stopped before its end: what it says is what it found so far
        errors += 1
        text = (
            f"the campaign was interrupted ({data['interrupted']}): it reports what it found "
            "until then"
        )
        cases.append(
            '  <testcase classname="kernel_fuzz.campaign" name="interrupted">'
            f"<error message={quoteattr(text)} type={quoteattr(str(data['interrupted']))}/>"
            "</testcase>"
        )
    props = (
        "<properties>"
        f'<property name="complete" value="{str(bool(data.get("complete"))).lower()}"/>'
        f'<property name="interrupted" value={quoteattr(str(data.get("interrupted") or ""))}/>'
        "</properties>"
    )
    head = (
        f'<testsuite name="kernel-fuzz campaign" tests="{len(cases)}" failures="{failures}" '
        f'errors="{errors}" skipped="{skipped}" time="{data["seconds"]}" timestamp={quoteattr(data["started"])}>'
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n'
        + head
        + "\n  "
        + props
        + "\n"
        + "\n".join(cases)
        + "\n</testsuite>\n</testsuites>\n"
    )


# HTML ----------------------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
h1{font-size:1.5em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
.finding{border:1px solid #ccc;border-radius:6px;padding:.6em 1em;margin:1em 0}
.new{border-left:6px solid #c03} .still{border-left:6px solid #e90}
.maps{display:flex;flex-wrap:wrap;gap:1.5em}
.map img{image-rendering:pixelated;border:1px solid #999;display:block}
.legend{width:320px;height:10px;image-rendering:pixelated;display:block}
code,pre{background:#f4f4f4;padding:1px 3px} pre{padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}
.tag{display:inline-block;padding:0 .4em;border-radius:3px;background:#eee;margin-right:.3em}
"""

_SELFCHECK = """
<script>
window.addEventListener('load', function () {
  var bad = [];
  var imgs = document.querySelectorAll('img');
  imgs.forEach(function (im, i) { if (!(im.complete && im.naturalWidth > 0)) bad.push('img' + i); });
  var svgs = document.querySelectorAll('svg');
  svgs.forEach(function (s, i) { var b = s.getBoundingClientRect(); if (!(b.width > 0 && b.height > 0)) bad.push('svg' + i); });
  document.body.setAttribute('data-selfcheck', bad.length ? 'fail ' + bad.join(',')
    : 'ok ' + imgs.length + ' images ' + svgs.length + ' svgs');
});
</script>
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _finding_html(f: dict[str, Any], out: Path) -> str:
    cls = "new" if f["triage"] == "new" else "still"
    tags = [f["triage"], f["class"]] + (["mutant"] if f.get("mutant") else [])
    parts = [
        f'<section class="finding {cls}" id="f-{_e(f.get("signature"))}">',
        f"<h3>{''.join(f'<span class=tag>{_e(t)}</span>' for t in tags)}"
        f"{_e(f['target'])} on {_e(', '.join(f['backends']))}</h3>",
        f"<p>{_e(f['message'])}</p>",
    ]
    if f.get("case"):
        parts.append(
            f"<p>minimal case ({_e(f.get('case_size'))} elements): <code>{_e(f['case'][:400])}</code></p>"
        )
    if note := size_note(f):
        parts.append(f"<p>{_e(note)}</p>")
    if maybe := maybe_note(f):
        parts.append(f"<p>{_e(maybe)}</p>")
    small = f.get("interpreter_minimal")
    if small:
        parts.append(
            f"<p>smaller in {_e(small['backend'])} (the same kernel source): "
            f"{_e(small['case_size'])} elements: <code>{_e(small['case'][:400])}</code></p>"
        )
    for h in f.get("hazards", []):
        parts.append(f"<p>hazard: {_e(h)}</p>")
    if f.get("also_seen"):
        items = "".join(
            f"<li>{_e(s.get('class'))} ({_e(s.get('property'))}, {_e(s.get('output'))}), "
            f"{_e(s.get('case_size'))} elements, told by its "
            f"{_e(SEEN_HOW.get(s.get('how'), s.get('how')))}"
            + (
                f": <code>python {_e(rel_path(s['reproducer'], out))}</code>"
                if s.get("reproducer")
                else ""
            )
            + "</li>"
            for s in f["also_seen"]
        )
        parts.append(
            f"<details open><summary>{_e(also_seen_text(f))}</summary><ul>{items}</ul></details>"
        )
    origin = origin_text(f)
    if origin:
        parts.append("<pre class=origin>" + _e("\n".join(origin)) + "</pre>")
    log = f.get("details", {}).get("log")
    if log:
        parts.append(
            f"<details><summary>worker log</summary><pre>{_e(log[-3000:])}</pre></details>"
        )
    maps = f.get("plots") or []
    if maps:
        parts.append('<div class="maps">')
        for m in maps:
            rows, cols = len(m["grid"]), len(m["grid"][0]) if m["grid"] else 1
            cell = min(320 / max(cols, 1), 320 / max(rows, 1), 40.0)
            parts.append(
                f'<figure class="map"><img alt="error map of {_e(m["output"])}" src="{plots.heatmap_png(m["grid"])}" '
                f'style="width:{cols * cell:.0f}px;height:{rows * cell:.0f}px">'
                f'<img class="legend" alt="scale" src="{plots.legend_png()}">'
                f"<figcaption><b>{_e(m['output'])}</b> {_e(m['reduced'])}; error / tolerance "
                f"(tolerance {_tolerance_range(m)}; cells are max over {m['block'][0]}x{m['block'][1]} blocks): white exact, "
                f"blue within tolerance, yellow-red above, magenta NaN/Inf; worst at {_e(m['worst'])}</figcaption></figure>"
                f"<figure>{plots.histogram_svg(m)}<figcaption>{_e(m['output'])}: log10(error / tolerance), "
                f"{m['exact']} exact, {m['nonfinite']} NaN/Inf of {m['elements']}</figcaption></figure>"
            )
        parts.append("</div>")
    elif f["class"] in ("crash", "hang"):
        parts.append("<p><i>no output to plot: the kernel did not return</i></p>")
    for r in f.get("reproducers", [f.get("reproducer")]):
        if r:
            parts.append(f"<p>reproducer: <code>python {_e(rel_path(r, out))}</code></p>")
    parts.append(f"<p><small>signature {_e(f.get('signature'))}</small></p></section>")
    return "\n".join(parts)


def html_report(data: dict[str, Any], out: Path) -> str:
    """``index.html``: the summary, each new and still failing finding with its error maps,
    what was fixed, throughput, every (target, backend) pair, warnings; self-contained."""
    body = _html_summary(data)
    body += _html_matrix(data["results"])
    for title, pick in (("New findings", "new"), ("Still failing", "still failing")):
        group = [f for f in data["findings"] if f["triage"] == pick]
        if group:
            body.append(f"<h2>{title}</h2>")
            body.extend(_finding_html(f, out) for f in group)
    if data["triage"]["fixed"]:
        body.append("<h2>Fixed</h2><ul>")
        body.extend(
            f"<li><code>{_e(f['class'])}</code> in {_e(f['target'])}</li>"
            for f in data["triage"]["fixed"]
        )
        body.append("</ul>")
    body += _html_hosts(data)
    body += _html_targets(data["results"], merged=bool(data.get("merged")))
    warnings = [*data["notes"], *data["database"]["problems"]]
    if warnings:
        body.append(
            "<h2>Warnings</h2><ul>" + "".join(f"<li>{_e(w)}</li>" for w in warnings) + "</ul>"
        )
    body.append(
        "<p><small>"
        + _e(", ".join(f"{k} {v}" for k, v in data["versions"].items()))
        + "</small></p>"
    )
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>kernel-fuzz campaign {_e(data['started'])}</title><style>{_CSS}</style></head>"
        "<body>\n" + "\n".join(body) + _SELFCHECK + "</body></html>\n"
    )


def _html_summary(data: dict[str, Any]) -> list[str]:
    s = data["summary"]
    state = (
        "complete"
        if data["complete"]
        else f"incomplete ({_e(data.get('interrupted') or 'running')})"
    )
    body = [
        f"<h1>{'Merged fuzz campaigns' if data.get('merged') else 'Fuzz campaign'} "
        f"{_e(data['started'])}</h1>",
        f"<p>{state}; profile <code>{_e(data['profile'])}</code>, budget {data['budget']:g} s, "
        f"ran {data['seconds']:.0f} s on {_e(data['device'])}; {s['examples']} examples; "
        f"{len(data['workers'])} worker(s), {data['worker_restarts']} restart(s).</p>",
        f"<p><b>{s['new']} new, {s['still_failing']} still failing, {s['fixed']} fixed</b>; "
        + (
            f"failing real targets: {_e(', '.join(s['real_failed']))}"
            if s["real_failed"]
            else "no real target failed"
        )
        + (
            f"; mutants found {s['mutants_found']}/{s['mutants_total']}"
            if s["mutants_total"]
            else ""
        )
        + "</p>",
    ]
    if s["harness_errors"]:
        body.append(
            "<h2>Harness errors</h2><ul>"
            + "".join(f"<li>{_e(e)}</li>" for e in s["harness_errors"])
            + "</ul>"
        )
    return body


def _html_matrix(rows: list[dict[str, Any]]) -> list[str]:
    """The target x backend matrix (``matrix``); a pair with fewer than 200 examples is marked."""
    if not rows:
        return []
    backends, table = matrix(rows)
    body = [
        "<h2>Matrix</h2><table class=matrix><tr><th>target</th>"
        + "".join(f"<th>{_e(b)}</th>" for b in backends)
        + "</tr>"
    ]
    for target, cells in table:
        tds = []
        for b in backends:
            r = cells.get(b)
            few = r is not None and r["examples"] < 200 and not r.get("retired")
            style = ' style="background:#fdd"' if few else ""
            tds.append(f"<td{style}>{_e(cell_text(r))}</td>")
        body.append(f"<tr><td>{_e(target)}</td>{''.join(tds)}</tr>")
    body.append("</table><p><small>red: fewer than 200 examples (not fuzzed)</small></p>")
    return body


def _html_hosts(data: dict[str, Any]) -> list[str]:
    merged = data.get("merged")
    if not merged:
        return []
    body = [
        "<h2>Hosts</h2><table><tr><th>host</th><th>device</th><th>started</th><th>examples</th>"
        "<th>state</th><th>folder</th></tr>"
    ]
    for h in merged["hosts"]:
        state = "complete" if h["complete"] else f"incomplete ({h.get('interrupted') or 'error'})"
        body.append(
            f"<tr><td>{_e(h['host'])}</td><td>{_e(h['device'])}</td><td>{_e(h['started'])}</td>"
            f"<td>{h['examples']}</td><td>{_e(state)}</td><td>{_e(h['folder'])}</td></tr>"
        )
    body.append("</table>")
    return body


def _html_targets(results: list[dict[str, Any]], *, merged: bool = False) -> list[str]:
    body = ["<h2>Throughput</h2>"]
    body.append(
        plots.bars_svg(
            [(f"{r['target']} [{r['backend']}]", r["examples_per_second"]) for r in results],
            unit=" ex/s",
        )
    )
    body.append(
        "<h2>Pairs</h2><table><tr><th>target</th><th>backend</th><th>status</th><th>examples</th>"
        "<th>ex/s</th><th>seconds</th><th>compile share</th><th>classes</th>"
        + ("<th>hosts</th>" if merged else "")
        + "</tr>"
    )
    for r in results:
        body.append(
            f"<tr><td>{_e(r['target'])}</td><td>{_e(r['backend'])}</td><td>{_e(r['status'])}"
            f"{' (' + _e(r['retired']) + ')' if r['retired'] else ''}</td><td>{r['examples']}</td>"
            f"<td>{r['examples_per_second']:.1f}</td><td>{r['seconds']:.1f}</td><td>{r['compile_share']:.0%}</td>"
            f"<td>{_e(', '.join(f['class'] for f in r['findings']) or '-')}</td>"
            + (f"<td>{_e(hosts_cell(r))}</td>" if merged else "")
            + "</tr>"
        )
    body.append("</table>")
    return body


def _tolerance_range(m: dict[str, Any]) -> str:
    """The per-element tolerance of an error map: one number, or its range."""
    lo, hi = m["tolerance"], m.get("tolerance_max", m["tolerance"])
    return f"{lo:.3g}" if hi == lo else f"{lo:.3g} to {hi:.3g} per element"
