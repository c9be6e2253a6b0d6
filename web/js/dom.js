// dom.js: elements built from data without innerHTML, so that no text from the API ever
// becomes markup. Children may be nodes, strings (text), numbers, arrays, or null/false
// (skipped).

const SVG_NS = "http://www.w3.org/2000/svg";

function addChildren(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// Sets attributes: `class`, `on<event>` handlers, `dataset` (an object), boolean attributes
// (true sets, false leaves out); everything else through setAttribute. `style` is refused:
// the Content-Security-Policy forbids inline styles (set el.style.prop from code instead).
function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "style") throw new Error("dom: inline style attributes break the CSP");
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  return el;
}

// h("a", {href: "/x", class: "btn"}, "text", child...) -> an HTML element.
export function h(tag, attrs, ...children) {
  return addChildren(setAttrs(document.createElement(tag), attrs), children);
}

// The same for SVG elements.
export function s(tag, attrs, ...children) {
  return addChildren(setAttrs(document.createElementNS(SVG_NS, tag), attrs), children);
}

// Replaces everything inside el by children; returns el.
export function fill(el, ...children) {
  el.replaceChildren();
  return addChildren(el, children);
}
