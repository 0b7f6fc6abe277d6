"""OSWorld's ``active_tab_html_parse`` getter as a program the seat's user runs: ``python3 -c SOURCE PROFILE
CONFIG``, which writes the getter's JSON object on its standard output.

Ported from desktop-env 1.0.2 (OSWorld's code, Apache-2.0), evaluators/getters/chrome.py
``get_active_tab_html_parse``. OSWorld connects Playwright over CDP, takes the page whose URL is the address
bar's, waits for its network to idle, and reads values of its DOM by the config's rules. This program takes the
front page of the browser's DevTools list (as cud.osworld.chrome_tabs does), waits up to :data:`LOAD_SECONDS`
for its ``document.readyState`` to be ``complete``, and sends it one ``Runtime.evaluate`` of the constant
:data:`SCRIPT` (through the page's DevTools socket, as cud.osworld.chrome_open_tabs does) whose only input is
the list of ``[kind, selector]`` requests, a JSON text inside a JSON string literal: nothing of the task or the
page becomes script text. The page's answers are composed into the getter's object by :func:`html_parse`, with
OSWorld's own Python expressions (``strip``, ``int``, ``lower``), run twice: once to learn the requests, once
on the page's answers.

What each kind reads, as Playwright does it for the getter (``query_selector_all`` of a CSS selector,
``locator("xpath=…").first``): ``text`` every match's ``textContent``; ``direct`` the trimmed, non-empty text
nodes directly under each match (the getter's own page function); ``li`` the ``innerText`` of the first
``span`` of each ``SELECTOR li.catAllProducts``; ``h3`` the ``textContent`` of each match's first ``h3``;
``xpath`` the ``textContent`` of the first element the XPath finds; ``input`` that element's ``value`` (a
label's control in its place, Playwright's ``input_value``; any other element gives ``""``, as Playwright's
error does). A request that throws (a selector the page rejects) finds nothing, as the getter's ``safely_…``
helpers and its ``except`` give. Playwright's CSS engine also looks inside open shadow roots; ``querySelectorAll``
does not (docs/osworld.md, "Chrome").

Without a browser the value is ``null`` (the getter's None), ``{}`` when the front page's socket fails (the
getter's value when it finds no page); a ``'`` is written ``\\u0027``, since
check_direct_json_object turns every ``'`` of a text into ``"`` before reading it as JSON.

The standard library only, so the system's ``python3`` runs it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

# send and receive are evaluate's: the program inlines each function it names here (cud.osworld.chrome.program).
from cud.osworld.chrome_open_tabs import call, connected, endpoint, evaluate, receive, send, upgrade  # noqa: F401

#: How long the front page's document may take to load; within a metric check's 60 s.
LOAD_SECONDS = 20
#: The page's side, a constant: ``q`` is the requests' list. It waits for the load, then answers each request
#: with a list of texts, or null where it threw.
SCRIPT = """async q => {
for (let i = 0; i < LOAD_TENTHS && document.readyState !== "complete"; i++) await new Promise(r => setTimeout(r, 100));
const all = s => Array.from(document.querySelectorAll(s));
const first = s => {
 const r = document.evaluate(s, document, null, XPathResult.ORDERED_NODE_ITERATOR_TYPE, null);
 for (let n = r.iterateNext(); n; n = r.iterateNext()) if (n.nodeType === Node.ELEMENT_NODE) return [n];
 return [];
};
const kinds = {
 text: s => all(s).map(e => e.textContent),
 direct: s => all(s).map(e => Array.from(e.childNodes).filter(n => n.nodeType === Node.TEXT_NODE)
  .map(n => n.textContent.trim()).filter(Boolean)),
 li: s => all(s + " li.catAllProducts").filter(e => e.querySelector("span"))
  .map(e => e.querySelector("span").innerText),
 h3: s => all(s).filter(e => e.querySelector("h3")).map(e => e.querySelector("h3").textContent),
 xpath: s => first(s).map(e => e.textContent),
 input: s => first(s).map(e => {
  if (!e.matches("input, textarea, select") && !e.isContentEditable && e.closest("label")?.control)
   e = e.closest("label").control;
  if (!["INPUT", "TEXTAREA", "SELECT"].includes(e.nodeName)) throw new Error("not an input");
  return e.value;
 }),
};
return q.map(([kind, s]) => { try { return kinds[kind](s); } catch (e) { return null; } });
}""".replace("LOAD_TENTHS", str(10 * LOAD_SECONDS))


def html_parse(url: str, config: dict[str, Any], found: Callable[[str, str], list[Any]]) -> dict[str, Any]:
    """The getter's object for the page at ``url``: ``found(kind, selector)`` is the page's answer (a list)."""
    return_json: dict[str, Any] = {}

    def stripped(kind: str, selector: str) -> list[str]:
        return [t.strip() for t in found(kind, selector)]

    def by_rank(objects: dict[str, Any], texts: Callable[[str], list[Any]]) -> None:
        for class_name, object_dict in objects.items():
            elements_texts = texts("." + class_name)
            for order_key, key in object_dict.items():
                index = int(order_key)
                return_json[key] = elements_texts[index] if len(elements_texts) > index else ""

    def marked(objects: dict[str, Any], elements_texts: list[str]) -> None:
        for each_key in objects:
            if any(each_key.lower() == text.lower() for text in elements_texts):
                return_json[each_key.lower()] = True
        for each_key in elements_texts:
            if all(each_key.lower() not in item.lower() for item in objects):
                return_json["is_other_exist"] = True
                break
        if "is_other_exist" not in return_json.keys():
            return_json["is_other_exist"] = False

    category = config["category"]
    if category == "class":
        by_rank(config.get("class_multiObject", {}), lambda s: stripped("text", s))
        by_rank(config.get("class_multiObject_child", {}), lambda s: (found("direct", s) or [[]])[0])
        by_rank(config.get("class_multiObject_only_child", {}), lambda s: stripped("h3", s))
        for class_name, object_list in config.get("class_multiObject_search_exist", {}).items():
            elements_texts = stripped("text", "." + class_name)
            for each_object in object_list:
                if each_object != "is_other_exist":
                    return_json[each_object] = each_object in elements_texts
            if "is_other_exist" in object_list:
                if any(e not in object_list for e in elements_texts):
                    return_json["is_other_exist"] = True
                if "is_other_exist" not in return_json.keys():
                    return_json["is_other_exist"] = False
        for class_name, key in config.get("class_singleObject", {}).items():
            element_text = stripped("text", "." + class_name)
            return_json[key] = element_text[0] if element_text else ""
    elif category in ("xpath", "input"):
        for xpath, key in config.get(category + "Object", {}).items():
            value = (found(category, xpath) or [""])[0]
            return_json[key] = value.strip() if value else ""
    elif category == "class&url":
        for class_name, object_list in config.get("class_multiObject", {}).items():
            marked(object_list, stripped("text", "." + class_name))
        for class_name, object_list in config.get("class_multiObject_li", {}).items():
            marked(object_list, stripped("li", "." + class_name))
        page_url = url.lower()
        for key in config.get("url_include_expected", []):
            if key.lower() not in return_json.keys():
                return_json[key.lower()] = key.lower() in page_url
        for key, value in config.get("url_include_expected_multichoice", {}).items():
            if value.lower() not in return_json.keys():
                return_json[value.lower()] = key.lower() in page_url
    return return_json


def page_answers(socket_url: str | None, requests: list[list[str]]) -> list[Any] | None:
    """The front page's answer to each request; None when its socket fails, or another DevTools client holds it
    (the list gives no socket)."""
    if not socket_url:
        return None
    try:
        with connected(socket_url, LOAD_SECONDS + 10) as sock:
            answers = evaluate(sock, upgrade(sock, socket_url), 1, "(" + SCRIPT + ")(JSON.parse("
                               + json.dumps(json.dumps(requests)) + "))")
    except (OSError, ValueError):
        return None
    return answers if isinstance(answers, list) and len(answers) == len(requests) else None


def main(argv: list[str]) -> int:
    profile, config = argv[0], json.loads(argv[1])
    try:
        front = [t for t in call(endpoint(profile), "/json/list") if t.get("type") == "page"][:1]
    except (OSError, ValueError):
        front = []
    out = None  # no browser: the getter's None
    if front:
        url, requests = front[0]["url"], []

        def asked(kind: str, selector: str) -> list[Any]:
            requests.append([kind, selector])
            return []

        html_parse(url, config, asked)
        answers = page_answers(front[0].get("webSocketDebuggerUrl"), requests)
        out = {}  # a page it cannot read: the getter's {} for a page it does not find
        if answers is not None:
            found = {(kind, selector): answer for (kind, selector), answer in zip(requests, answers, strict=True)}
            out = html_parse(url, config, lambda kind, selector: found.get((kind, selector)) or [])
    sys.stdout.buffer.write(json.dumps(out).replace("'", "\\u0027").encode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
