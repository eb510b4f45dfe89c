// dom.js - what the views share to build their pages.

// an element: its properties, then its children (nodes or text)
export function el(tag, props = {}, ...kids) {
  const e = document.createElement(tag);
  Object.assign(e, props);
  e.append(...kids);
  return e;
}
