"""One look for every page Shapeshift writes or serves: the live dashboard, the experiment
report and the trace-characterization report share this palette, type and table style, so
a simulation report reads like the controller's page. Imports nothing."""

#: The shared rules: colour variables, type, headings, tables, state badges.
PAGE_CSS = """
:root { --fg: #1d2430; --muted: #69707d; --line: #e3e6ea; --bg: #f7f8fa; --accent: #2f6fdb; }
body { font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 1.6em 0 8px; }
table { border-collapse: collapse; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); }
th { text-align: left; color: var(--muted); font-weight: 600; }
a { color: var(--accent); }
"""

#: Report pages (static HTML files): the shared rules plus a centred column on white cards.
REPORT_CSS = (
    PAGE_CSS
    + """
body { max-width: 1100px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 20px; }
table { background: #fff; border: 1px solid var(--line); margin: .5em 0; font-size: 13px; }
td { font-variant-numeric: tabular-nums; }
figure { margin: 1.5em 0; background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px; }
figcaption { font-size: 13px; color: var(--muted); }
img { max-width: 100%; }
pre { background: #fff; border: 1px solid var(--line); padding: 1em; overflow-x: auto; font-size: 12px; }
.note { color: #8a5a00; }
"""
)
