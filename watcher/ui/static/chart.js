// Small hand-drawn SVG charts (no library): a line of points and grouped bars. Labels are
// text nodes; a chart carries a title and a description for screen readers.

const NS = "http://www.w3.org/2000/svg";
const W = 640, H = 250, L = 56, R = 16, T = 26, B = 40;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function frame(title, description) {
  const root = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img" });
  root.append(svg("title", {}, title), svg("desc", {}, description));
  root.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  root.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  return root;
}

function scale(lo, hi, a, b) {
  const span = hi - lo || 1;
  return (v) => a + ((v - lo) / span) * (b - a);
}

// points: [{x, y}] (numbers); xLabel(x) and yLabel(y) format the axis ends.
export function lineChart(title, points, { xLabel = String, yLabel = String, xName = "", yName = "", dots = false } = {}) {
  const description = points.map((p) => `${xLabel(p.x)}: ${yLabel(p.y)}`).join("; ") || "no data";
  const root = frame(title, description);
  if (!points.length) {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no data yet"));
    return root;
  }
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y1 = Math.max(...ys, 1);
  const sx = scale(x0, x1, L, W - R), sy = scale(0, y1, H - B, T);
  if (!dots) root.append(svg("polyline", { class: "line", points: points.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" ") }));
  for (const p of points) root.append(svg("circle", { class: "dot", cx: sx(p.x), cy: sy(p.y), r: 3 }));
  root.append(svg("text", { x: L, y: H - B + 16 }, xLabel(x0)));
  root.append(svg("text", { x: W - R, y: H - B + 16, "text-anchor": "end" }, xLabel(x1)));
  root.append(svg("text", { x: L - 6, y: T + 10, "text-anchor": "end" }, yLabel(y1)));
  root.append(svg("text", { x: L - 6, y: H - B, "text-anchor": "end" }, "0"));
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, xName));
  root.append(svg("text", { x: 4, y: 12 }, yName));
  return root;
}

// groups: [{label, values: [{name, value}]}]; each value a bar, with its number above it.
export function barChart(title, groups, { valueLabel = String } = {}) {
  const description = groups.map((g) => `${g.label}: ${g.values.map((v) => `${v.name} ${valueLabel(v.value)}`).join(", ")}`).join("; ") || "no data";
  const root = frame(title, description);
  if (!groups.length) {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no data yet"));
    return root;
  }
  const top = Math.max(1, ...groups.flatMap((g) => g.values.map((v) => v.value)));
  const sy = scale(0, top, H - B, T);
  const slot = (W - L - R) / groups.length;
  groups.forEach((g, i) => {
    const width = (slot * 0.7) / g.values.length;
    g.values.forEach((v, j) => {
      const x = L + i * slot + slot * 0.15 + j * width;
      root.append(svg("rect", { class: `bar ${v.name}`, x, y: sy(v.value), width: width - 2, height: H - B - sy(v.value) }));
      root.append(svg("text", { x: x + width / 2, y: sy(v.value) - 3, "text-anchor": "middle" }, `${v.name} ${valueLabel(v.value)}`));
    });
    root.append(svg("text", { x: L + i * slot + slot / 2, y: H - B + 16, "text-anchor": "middle" }, g.label));
  });
  return root;
}
