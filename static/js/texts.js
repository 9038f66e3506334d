// Texts: every word the page shows, the protocol's [texts] over the defaults of
// study/protocol/texts.py, with placeholders filled in and a singular chosen for the number one.
const TEXTS = JSON.parse(document.getElementById("texts").textContent);

export function t(key, values) {
  return TEXTS[key].replace(/\{([a-z_]+)\}/g, (whole, name) =>
    (values && name in values ? String(values[name]) : whole));
}

// A text showing a number: its singular `<key>_one` when the number is 1 (study/protocol/texts.py).
export function tn(key, count, values) {
  return t(count === 1 && (key + "_one") in TEXTS ? key + "_one" : key, values);
}
