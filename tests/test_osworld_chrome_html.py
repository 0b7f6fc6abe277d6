"""OSWorld's ``active_tab_html_parse`` getter (cud/osworld/chrome.py, chrome_html.py): the converter turns OSWorld's
own chrome tasks' rules into a ``command`` getter running the program with the rules as JSON data, refuses the
configs it cannot port naming the key, and the program, run against Debian's real Chromium (headless, its DevTools
port its own choice on loopback), gives the object desktop-env 1.0.2's get_active_tab_html_parse gives through
Playwright over CDP on the same page (tests/support/osworld_reference.py), on rules of every kind the tasks use.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import signal
import subprocess
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cud.errors import SpecError
from cud.osworld.chrome import PROFILE, program
from cud.osworld.chrome_open_tabs import call, endpoint, wait_loaded
from cud.osworld.convert import convert_osworld
from cud.osworld.metrics import metric
from cud.osworld.seat import SYSTEM_PYTHON
from cud.spec import parse_spec
from cud.spec import values as v
from tests.support.http_files import Served, serve_files
from tests.support.osworld_outcomes import outcome
from tests.support.osworld_reference import FakeVm, address_bar, reference, reference_getter
from tests.support.recorder import wait_until

CHROMIUM = os.environ.get("CUD_TEST_CHROMIUM", "/usr/bin/chromium")

#: The getters of OSWorld's chrome tasks that convert (their evaluator's result, as evaluation_examples has it).
FLIGHTS = {"type": "active_tab_html_parse", "goto_prefix": "https://www.", "category": "class",
           "class_singleObject": {"mach-flight-context-info__wrapper--date": "time",
                                  "mach-global-tabs-small__wrapper__tab--active": "category"},
           "class_multiObject_child": {"mach-flight-context-info__wrapper__info--separator": {"0": "start", "1": "end"}}}
COFFEE = {"type": "active_tab_html_parse", "goto_prefix": "https://www.", "category": "class",
          "class_multiObject_search_exist": {"fT28tf": ["Black", "$25 - $60", "On sale", "is_other_exist"]}}
JERSEYS = {"type": "active_tab_html_parse", "category": "class&url",
           "class_multiObject": {"filter-selector-link": ["over $60", "women", "jerseys", "nike"]},
           "url_include_expected": ["over $60", "women", "jerseys", "nike"]}
TOYS = {"type": "active_tab_html_parse", "goto_prefix": "https://www.", "category": "class&url",
        "class_multiObject_li": {"pmpSearch_breadcrumb": ["Spider-Man", "Toys", "Kids"], "sbSelector": ["Price Low-High"]},
        "url_include_expected_multichoice": {"Spider-Man": "Spider-Man", "spiderman": "Spider-Man", "Toys": "Toys",
                                             "Kids": "Kids", "S=4": "Price Low-High"}}
CAR_RANK = {"type": "active_tab_html_parse", "goto_prefix": "https://www.", "category": "class", "class_singleObject": {},
            "class_multiObject": {"location-info": {"0": "start_location", "1": "end_location"},
                                  "day-time-info": {"0": "from", "1": "to"}}}
HOTEL = {"type": "active_tab_html_parse", "goto_prefix": "https://www.", "category": "xpath", "xpathObject": {
    "//button[@data-automation='checkin']//div[contains(@class,'Wh')]//span": "from",
    "//h2[@data-automation='header_geo_title']": "city",
    "//button[@data-automation='roomsandguests']//div[contains(@class,'Wh')]": "adult"}}
APPOINTMENT = {"type": "active_tab_html_parse", "category": "class",
               "class_multiObject_only_child": {"HAZ16": {"0": "content", "1": "time"}}}
DETAILS = {"type": "active_tab_html_parse", "category": "input", "inputObject": {
    "/html/body/div[2]/div/form/div[7]/div/div/div[1]/input[1]": "name",
    "/html/body/div[2]/div/form/div[7]/div/div/div[1]/input[2]": "mail"}}


def no_fetch(url: str) -> bytes:
    raise AssertionError(f"nothing should be fetched, got {url}")


def converted_getter(result: dict[str, Any], rules: object = None) -> list[str]:
    """The command the converter makes of ``result`` under check_direct_json_object."""
    raw = {"id": "t", "instruction": "x", "evaluator": {
        "func": "check_direct_json_object", "result": result,
        "expected": {"type": "rule", "rules": rules if rules is not None else {"expected": {}}}}}
    converted = convert_osworld(raw, source="t.json", fetch=no_fetch)
    parse_spec(dict(converted))
    (check,) = converted["checks"]
    assert check["metric"] == "check_direct_json_object"
    command: list[str] = check["result"]["command"]
    return command


def unpacked(text: str) -> str:
    """The program a ``python3 -c`` text runs: itself, or the compressed text it executes."""
    if not text.startswith("import base64, zlib\nexec(zlib.decompress(base64.b85decode("):
        return text
    (packed,) = [n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant)]
    return zlib.decompress(base64.b85decode(packed)).decode("utf-8")


# -- the converter -------------------------------------------------------------------------------


@pytest.mark.parametrize("result", [FLIGHTS, COFFEE, JERSEYS, TOYS, CAR_RANK, HOTEL, APPOINTMENT, DETAILS])
def test_the_tasks_rules_become_the_programs_json_argument(result: dict[str, Any]) -> None:
    """Every key the category reads, as written; ``type`` and ``goto_prefix`` (the address bar's scheme) stay out."""
    rules = {k: r for k, r in result.items() if k not in ("type", "goto_prefix")}
    command = converted_getter(result)
    assert command[:4] == [SYSTEM_PYTHON, "-c", program("chrome_html"), PROFILE]
    assert json.loads(command[4]) == rules and len(command) == 5


def test_keys_the_category_does_not_read_are_left_out() -> None:
    command = converted_getter({**DETAILS, "xpathObject": {"//p": "p"}, "class_singleObject": {"a": "b"}})
    assert json.loads(command[-1]) == {"category": "input", "inputObject": DETAILS["inputObject"]}


def test_the_program_is_python_within_one_argument_without_docstrings_or_comments() -> None:
    text = program("chrome_html")
    assert len(text) <= v.MAX_ARG
    inner = unpacked(text)
    assert inner != text  # compressed: the plain text is longer than an argument
    compile(inner, "chrome_html", "exec")
    assert '"""' not in inner and "# " not in inner and "Any" not in inner


@pytest.mark.parametrize(("result", "at", "words"), [
    ({**DETAILS, "category": "label", "labelObject": {"Name": "n"}}, "category", ["'label'", "text= selector"]),
    ({**DETAILS, "category": "css"}, "category", ["must be one of", "'css'"]),
    ({"type": "active_tab_html_parse"}, "category", ["must be one of"]),
    ({**APPOINTMENT, "class_multiObject_only_child": {"HAZ16": {"first": "content"}}}, "class_multiObject_only_child",
     ["index"]),
    ({**APPOINTMENT, "class_multiObject_only_child": {"HAZ16": {"-1": "content"}}}, "class_multiObject_only_child",
     ["from 0"]),
    ({**APPOINTMENT, "class_multiObject_only_child": {"HAZ16": {"0": 7}}}, "class_multiObject_only_child", ["key"]),
    ({**COFFEE, "class_multiObject_search_exist": {"fT28tf": "Black"}}, "class_multiObject_search_exist",
     ["lists of texts"]),
    ({**JERSEYS, "url_include_expected": "nike"}, "url_include_expected", ["list of texts"]),
    ({**TOYS, "url_include_expected_multichoice": {"S=4": ["x"]}}, "url_include_expected_multichoice", ["texts"]),
    ({**HOTEL, "xpathObject": ["//h2"]}, "xpathObject", ["object naming a key"]),
    ({**FLIGHTS, "class_singleObject": {"a" * 5000: "time"}}, "", ["characters as JSON", str(v.MAX_ARG)]),
])
def test_a_config_the_getter_cannot_take_is_refused_naming_the_key(result: dict[str, Any], at: str,
                                                                  words: list[str]) -> None:
    with pytest.raises(SpecError) as caught:
        converted_getter(result)
    assert caught.value.details["key"] == "evaluator.result" + (f".{at}" if at else ""), caught.value.details
    for word in words:
        assert word in caught.value.message, caught.value.message


def test_the_getter_is_refused_with_a_metric_that_reads_more() -> None:
    raw = {"id": "t", "instruction": "x", "evaluator": {"func": "exact_match", "result": HOTEL,
                                                        "expected": {"type": "rule", "rules": {"expected": "x"}}}}
    with pytest.raises(SpecError) as caught:
        convert_osworld(raw, source="t.json", fetch=no_fetch)
    assert "'active_tab_html_parse'" in caught.value.message and "check_direct_json_object" in caught.value.message


#: Text that would end or escape a script, a JSON string or a shell word if it were pasted into one.
NASTY = st.lists(st.sampled_from(['"', "`", "${", "}", "\\", "</script>", "\n", "\u2028", "'", ")", "]", "q", "é", ";"]),
                 min_size=1, max_size=8).map("".join)


@settings(max_examples=60, deadline=None)
@given(NASTY, NASTY)
def test_rules_reach_the_program_only_as_data(name: str, key: str) -> None:
    command = converted_getter({"type": "active_tab_html_parse", "category": "class",
                                "class_singleObject": {name: key}, "class_multiObject": {name: {"0": key}}})
    assert command[:4] == [SYSTEM_PYTHON, "-c", program("chrome_html"), PROFILE]
    assert json.loads(command[4]) == {"category": "class", "class_singleObject": {name: key},
                                      "class_multiObject": {name: {"0": key}}}


# -- against Debian's Chromium ------------------------------------------------------------------

#: A page with the DOM the tasks' rules look for: texts with spaces around them (a no-break space, a line
#: separator, which Python's strip and JavaScript's trim agree on, and U+001C, which only Python's strip takes),
#: a breadcrumb whose span is upper-cased by CSS (innerText shows it so, textContent not).
PAGE = """<!doctype html><meta charset="utf-8"><title>Everything</title>
<body><div>first</div>
<div><div><form><div></div><div></div><div></div><div></div><div></div><div></div>
 <div><div><div><div><input value=" James Smith\u00a0"><input value="james.smith@gmail.com"></div></div></div></div>
</form></div></div>
<section>
 <p class="mach-flight-context-info__wrapper--date">\n   Fri, Jan 05, 2027 \u001c</p>
 <p class="mach-flight-context-info__wrapper__info--separator"> SEA <span class="aura-separator">to</span>NYC\u2028</p>
 <p class="mach-global-tabs-small__wrapper__tab--active"><b>Miles</b></p>
 <span class="fT28tf">Black</span><span class="fT28tf"> $25 - $60 </span><span class="fT28tf">On sale</span>
 <a class="filter-selector-link">Women</a><a class="filter-selector-link">Nike</a><a class="filter-selector-link">Blue</a>
 <div class="pmpSearch_breadcrumb"><ul><li class="catAllProducts"><span> Spider-Man </span></li>
  <li class="catAllProducts"><span style="text-transform: uppercase">toys</span></li><li class="other"><span>x</span></li>
 </ul></div>
 <div class="sbSelector"><li class="catAllProducts"><span>Price   Low-High</span></li></div>
 <div class="location-info">Boston Logan Intl Airport,\n\t\tBOS \n\t Pick-Up</div>
 <div class="day-time-info"> Fri, Jan 10, 12:00 PM</div>
 <div class="HAZ16"><h3> Apply for a pass </h3><p>no</p></div><div class="HAZ16"><p>none</p></div>
 <div class="HAZ16"><h3>January 04, 10:15 AM</h3></div>
 <button data-automation="checkin"><div class="Wh x"><span>Check In</span><span>Sat, Jan 11</span></div></button>
 <button data-automation="roomsandguests"><div class="a Wh">Rooms/Guests<span>1 Room, 2 Guests</span></div></button>
 <h2 data-automation="header_geo_title">  New York City Hotels </h2>
 <p id="t">target</p>
</section></body>"""
PATH = "/women/nike-jerseys/over-$60.html?S=4&q=spiderman"


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serve_files({PATH: PAGE.encode("utf-8")}) as s:
        yield s


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Debian's Chromium, headless, its DevTools on a loopback port it picked: its profile directory."""
    profile = tmp_path_factory.mktemp("chromium")
    started = subprocess.Popen([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                "--disable-background-networking", "--remote-debugging-address=127.0.0.1",
                                "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: (profile / "DevToolsActivePort").is_file(), timeout=60)
        yield profile
    finally:
        os.killpg(started.pid, signal.SIGKILL)
        started.wait(timeout=30)


@pytest.fixture
def front(chromium: Path, served: Served) -> Iterator[str]:
    """The page, opened in a new tab in front: its URL."""
    base = endpoint(str(chromium))
    url = served.base + PATH
    target = call(base, "/json/new?" + urllib.parse.quote(url, safe=""), "PUT")
    try:
        assert wait_loaded(target["webSocketDebuggerUrl"], 60)
        urllib.request.urlopen(base + "/json/activate/" + target["id"], timeout=10).close()
        pages = [t for t in call(base, "/json/list") if t.get("type") == "page"]
        assert pages[0]["url"] == url, pages
        yield url
    finally:
        urllib.request.urlopen(base + "/json/close/" + target["id"], timeout=10).close()


def ours(profile: Path, rules: dict[str, Any]) -> str:
    """What the converted getter's command prints, run as the seat runs it (away from the checkout)."""
    command = converted_getter(rules)
    done = subprocess.run([*command[:3], str(profile), command[4]], capture_output=True, timeout=120, check=True,
                          cwd=profile)
    return done.stdout.decode("utf-8")


def osworlds(profile: Path, url: str, rules: dict[str, Any]) -> Any:
    """desktop-env's getter, its Playwright connected over CDP to the same browser, the address bar showing ``url``."""
    env = FakeVm(tree=address_bar(url))
    env.vm_ip, env.chromium_port, env.server_port = "127.0.0.1", endpoint(str(profile)).rsplit(":", 1)[1], 0  # type: ignore[attr-defined]
    return reference_getter("chrome", "get_active_tab_html_parse")(env, {**rules, "goto_prefix": ""})


@pytest.mark.parametrize(("rules", "want"), [
    (FLIGHTS, {"time": "Fri, Jan 05, 2027", "category": "Miles", "start": "SEA", "end": "NYC"}),
    (COFFEE, {"Black": True, "$25 - $60": True, "On sale": True, "is_other_exist": False}),
    (JERSEYS, {"women": True, "nike": True, "is_other_exist": True, "over $60": False, "jerseys": True}),
    (TOYS, {"spider-man": True, "toys": True, "is_other_exist": False, "kids": False, "price low-high": True}),
    (CAR_RANK, {"start_location": "Boston Logan Intl Airport,\n\t\tBOS \n\t Pick-Up", "end_location": "",
                "from": "Fri, Jan 10, 12:00 PM", "to": ""}),
    (HOTEL, {"from": "Check In", "city": "New York City Hotels", "adult": "Rooms/Guests1 Room, 2 Guests"}),
    (APPOINTMENT, {"content": "Apply for a pass", "time": "January 04, 10:15 AM"}),
    (DETAILS, {"name": "James Smith", "mail": "james.smith@gmail.com"}),
    ({**DETAILS, "inputObject": {"//p[@id='t']": "p", "//nothing": "n", "][": "bad"}}, {"p": "", "n": "", "bad": ""}),
    ({**HOTEL, "xpathObject": {"//section/p[1]": "date", "//button": "b", "//*[": "bad"}},
     {"date": "Fri, Jan 05, 2027", "b": "Check InSat, Jan 11", "bad": ""}),
])
def test_the_program_reads_the_page_as_osworlds_getter(chromium: Path, front: str, rules: dict[str, Any],
                                                       want: dict[str, Any]) -> None:
    printed = ours(chromium, rules)
    found = osworlds(chromium, front, rules)
    assert found == want  # what OSWorld's getter gives on this page, as its code reads
    assert json.loads(printed.replace("'", '"')) == found
    for expected in ({"expected": found}, {"expected": {k: "x" for k in found}}):
        assert outcome(metric("check_direct_json_object"), printed, expected) == \
            outcome(reference("check_direct_json_object"), found, expected)


def test_no_browser_gives_null(tmp_path: Path) -> None:
    """No DevToolsActivePort, then one naming a port nobody listens on (a browser that ended): the getter's None."""
    assert ours(tmp_path, HOTEL) == "null"
    (tmp_path / "DevToolsActivePort").write_text("1\n/devtools/browser/x\n")
    assert ours(tmp_path, HOTEL) == "null"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(NASTY.filter(lambda s: "'" not in s))
@example('"]); document.title = `${1}`; ("')
@example("</script><script>alert(1)</script>")
def test_rule_text_never_becomes_script(chromium: Path, front: str, text: str) -> None:
    """An XPath holding the text in a string literal still finds its element: had the text been pasted into the
    script, the script would not parse, and nothing would be found."""
    rules = {"type": "active_tab_html_parse", "category": "xpath",
             "xpathObject": {f"//p[@id='t'][not(contains(., '{text}'))]": "k"}}
    assert json.loads(ours(chromium, rules)) == {"k": "target"}
