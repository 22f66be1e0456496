// Shared by the page's scripts: element lookup and the JSON API client.
"use strict";

const $ = id => document.getElementById(id);

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const r = await fetch(path, opts);
  const kind = r.headers.get("Content-Type") || "";
  const data = kind.includes("json") ? await r.json() : await r.text();
  if (!r.ok) {
    const detail = data && data.detail ? data.detail : data;
    throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return data;
}

function html(tag, text, cls) {  // an HTML element with text and a class
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
