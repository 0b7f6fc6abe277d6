"""OSWorld's Chrome on a seat (cud/osworld/chrome.py, chrome_open_tabs.py): Google Chrome's commands as Chromium's,
``chrome_open_tabs`` as a program run with the URLs as arguments, and that program driving Debian's real Chromium.

The converter tests take OSWorld's own chrome task 7a5a7856-f1b6-42a4-ade9-1ca81ca0f263 (its config and
postconfig as OSWorld's evaluation_examples has them). The seat test runs a task in OSWorld's format through
``cuctl eval --from-osworld`` on a real daemon and seat: the converted setup starts the seat's Chromium and opens
two pages a web server on the seat's own loopback serves; checks over the browser's own DevTools list pass and fail.
The seat has ``network = "none"``: cud opens a browser's DevTools port on no other seat (anyone on a shared
loopback could drive the browser), so the seat's pages are served inside its session too.
"""

from __future__ import annotations

import ast
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cud.errors import SpecError
from cud.osworld.chrome import MAX_URLS, PROFILE, TAB_GETTERS, program, seat_command
from cud.osworld.chrome_open_tabs import CONNECT_SECONDS, LOAD_SECONDS
from cud.osworld.convert import convert_osworld
from cud.osworld.seat import SYSTEM_PYTHON, template_files
from cud.spec import parse_spec
from cud.spec import values as v
from tests.support.daemon import cuctl, scenario
from tests.support.http_files import Served
from tests.support.judge_python import judge_python
from tests.support.netns import own_network
from tests.support.seat_users import SeatUsers
from tests.support.spec_seat import SpecSeat, spec_seat

#: OSWorld's chrome/7a5a7856-f1b6-42a4-ade9-1ca81ca0f263.json, its config and evaluator as written there.
URLS = ["https://blog.eleuther.ai/rotary-embeddings/", "https://jalammar.github.io/illustrated-transformer/"]
BOOKMARK_TASK: dict[str, Any] = {
    "id": "7a5a7856-f1b6-42a4-ade9-1ca81ca0f263", "snapshot": "chrome",
    "instruction": "Can you save this webpage I'm looking at to bookmarks bar so I can come back to it later?",
    "source": "https://www.youtube.com/watch?v=ZaZ8GcTxjXA",
    "config": [
        {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
        {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": URLS}},
    ],
    "trajectory": "trajectories/", "related_apps": ["chrome"],
    "evaluator": {
        "postconfig": [
            {"type": "launch", "parameters": {"command": ["pkill", "chrome"]}},
            {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
            {"type": "sleep", "parameters": {"seconds": 3}},
        ],
        "func": "is_expected_bookmarks", "result": {"type": "bookmarks"},
        "expected": {"type": "rule", "rules": {"type": "bookmark_bar_websites_urls",
                                               "urls": ["https://jalammar.github.io/illustrated-transformer/"]}},
    },
}
#: A check the converter takes, in the place of the bookmarks getter it does not.
LISTED = {"func": "exact_match", "result": {"type": "vm_command_line", "command": ["true"]},
          "expected": {"type": "rule", "rules": {"expected": ""}}}


def no_fetch(url: str) -> bytes:
    raise AssertionError(f"nothing should be fetched, got {url}")


def convert(raw: dict[str, Any]) -> dict[str, Any]:
    converted = convert_osworld(raw, source="t.json", fetch=no_fetch)
    parse_spec(dict(converted))
    return converted


def opening(urls: list[str]) -> dict[str, Any]:
    return {"run": [SYSTEM_PYTHON, "-c", program("chrome_open_tabs"), PROFILE, *urls],
            "timeout": CONNECT_SECONDS + LOAD_SECONDS * len(urls) + 15}


# -- the converter -------------------------------------------------------------------------------


def test_osworlds_bookmark_task_starts_chromium_and_opens_its_tabs() -> None:
    converted = convert({**BOOKMARK_TASK, "evaluator": {**LISTED, "postconfig": BOOKMARK_TASK["evaluator"]["postconfig"]}})
    assert converted["setup"] == [{"launch": ["chromium", "--remote-debugging-port=0"]}, opening(URLS)]
    assert converted["postconfig"] == [{"launch": ["pkill", "chromium"]},
                                       {"launch": ["chromium", "--remote-debugging-port=0"]}, {"sleep": 3.0}]


def test_osworlds_bookmark_task_reads_chromiums_bookmarks_file() -> None:
    converted = convert(BOOKMARK_TASK)
    assert converted["checks"] == [{"name": "is_expected_bookmarks on bookmarks", "metric": "is_expected_bookmarks",
                                    "result": {"file": ".config/chromium/Default/Bookmarks"},
                                    "expected": {"value": BOOKMARK_TASK["evaluator"]["expected"]["rules"]}}]


def test_the_bookmarks_getter_is_refused_with_another_metric() -> None:
    raw = {**BOOKMARK_TASK, "evaluator": {"func": "exact_match", "result": {"type": "bookmarks"},
                                          "expected": {"type": "rule", "rules": {"expected": "x"}}}}
    with pytest.raises(SpecError) as caught:
        convert_osworld(raw, source="t.json", fetch=no_fetch)
    assert "'bookmarks'" in caught.value.message and "is_expected_bookmarks" in caught.value.message


@pytest.mark.parametrize("module", ["chrome_open_tabs", "chrome_profile", "chrome_tabs"])
def test_each_program_fits_one_argument_and_is_python(module: str) -> None:
    text = program(module)
    assert len(text) <= v.MAX_ARG
    ast.parse(text)
    assert '"""' not in text and "#" not in text and "Any" not in text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(st.characters(exclude_characters="\0", exclude_categories=("Cs",)), min_size=1, max_size=80)
                .filter(str.strip), min_size=1, max_size=MAX_URLS))
def test_urls_are_arguments_never_program_text(urls: list[str]) -> None:
    (step,) = convert({"id": "t", "instruction": "x", "evaluator": LISTED,
                       "config": [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": urls}}]})["setup"]
    assert step == opening(urls)


@pytest.mark.parametrize(("urls", "words"), [
    ([], ["non-empty list"]), ("https://x", ["non-empty list"]), ([1], ["non-empty list"]), (["  "], ["non-empty"]),
    (["https://x"] * (MAX_URLS + 1), [f"{MAX_URLS + 1} URLs", "600 s"]),
])
def test_urls_that_cannot_open_are_refused_naming_the_key(urls: object, words: list[str]) -> None:
    raw = {"id": "t", "instruction": "x", "evaluator": LISTED,
           "config": [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": urls}}]}
    with pytest.raises(SpecError) as caught:
        convert_osworld(raw, source="t.json", fetch=no_fetch)
    assert caught.value.details["key"] == "config[0].parameters.urls_to_open"
    for word in words:
        assert word in caught.value.message, caught.value.message


@given(st.lists(st.text(max_size=20), max_size=4))
def test_other_commands_run_as_written(args: list[str]) -> None:
    if args[:1] in (["google-chrome"], ["google-chrome-stable"]) or args in (["pkill", "chrome"],
                                                                             ["socat", "tcp-listen:9222,fork",
                                                                              "tcp:localhost:1337"]):
        return
    assert seat_command(args) == args


def test_chromes_commands_become_chromiums() -> None:
    assert seat_command(["google-chrome-stable", "--remote-debugging-port=9", "--no-sandbox", "https://a/"]) == \
        ["chromium", "--remote-debugging-port=0", "--no-sandbox", "https://a/"]
    assert seat_command(["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]) is None
    assert seat_command(["pkill", "chrome"]) == ["pkill", "chromium"]
    assert seat_command(["pkill", "-f", "chrome"]) == ["pkill", "-f", "chrome"]


# -- the live browser's tabs -----------------------------------------------------------------------


def tabs_command(name: str) -> dict[str, Any]:
    return {"command": [SYSTEM_PYTHON, "-c", program("chrome_tabs"), PROFILE, name]}


@pytest.mark.parametrize(("gtype", "func", "expected", "made"), [
    ("active_url_from_accessTree", "is_expected_url_pattern_match", {"expected": ["forms\\?title="]}, "active_url"),
    ("active_url_from_accessTree", "is_expected_active_tab", {"type": "url", "url": "https://www.nfl.com/"},
     "active_url"),
    ("active_tab_info", "is_expected_url_pattern_match", {"expected": ["Ticket-Delivery-FAQs"]}, "active_url"),
    ("open_tabs_info", "is_expected_tabs", {"type": "url", "urls": ["https://www.airbnb.com"]}, "open_tabs"),
])
def test_the_tab_getters_read_the_live_browser_as_the_seats_user(gtype: str, func: str, expected: dict[str, Any],
                                                                 made: str) -> None:
    result = {"type": gtype, "goto_prefix": "https://www."} if gtype != "open_tabs_info" else {"type": gtype}
    converted = convert({"id": "t", "instruction": "x", "evaluator": {
        "func": func, "result": result, "expected": {"type": "rule", "rules": expected}}})
    assert converted["checks"] == [{"name": f"{func} on {gtype}"[:v.MAX_NAME], "metric": func,
                                    "result": tabs_command(made), "expected": {"value": expected}}]


@pytest.mark.parametrize(("gtype", "func"), [("active_tab_info", "exact_match"), ("open_tabs_info", "check_list"),
                                             ("active_url_from_accessTree", "is_expected_tabs"),
                                             ("open_tabs_info", "is_expected_active_tab")])
def test_a_tab_getter_is_refused_with_a_metric_that_reads_more_than_its_urls(gtype: str, func: str) -> None:
    raw = {"id": "t", "instruction": "x", "evaluator": {"func": func, "result": {"type": gtype},
                                                        "expected": {"type": "rule", "rules": {"expected": "x"}}}}
    with pytest.raises(SpecError) as caught:
        convert_osworld(raw, source="t.json", fetch=no_fetch)
    assert f"{gtype!r}" in caught.value.message and func in caught.value.message, caught.value.message


def test_active_tab_url_parse_passes_its_config_as_an_argument() -> None:
    """OSWorld's chrome/82bc8d6a getter, its keys as JSON after the program's name, never program text."""
    result = {"type": "active_tab_url_parse", "goto_prefix": "https://www.", "parse_keys": ["fromStation", "departing"],
              "replace": {"departing": "time"}}
    (check,) = convert({"id": "t", "instruction": "x", "evaluator": {
        "func": "check_direct_json_object", "result": result,
        "expected": {"type": "rule", "rules": {"expected": {"fromStation": "BOM"}}}}})["checks"]
    assert check["result"] == {"command": [*tabs_command("url_parse")["command"], json.dumps(
        {"parse_keys": ["fromStation", "departing"], "replace": {"departing": "time"}})]}


@pytest.mark.parametrize(("extra", "at"), [
    ({"parse_keys": "q"}, "parse_keys"), ({"parse_keys": [1]}, "parse_keys"), ({}, "parse_keys"),
    ({"parse_keys": ["q"], "replace": {"z": "t"}}, "replace"), ({"parse_keys": ["q"], "replace": ["q"]}, "replace"),
    ({"parse_keys": ["q"], "split_list": "yes"}, "split_list"),
])
def test_a_url_parse_config_the_getter_would_fail_on_is_refused(extra: dict[str, Any], at: str) -> None:
    raw = {"id": "t", "instruction": "x", "evaluator": {
        "func": "check_direct_json_object", "result": {"type": "active_tab_url_parse", **extra},
        "expected": {"type": "rule", "rules": {"expected": {}}}}}
    with pytest.raises(SpecError) as caught:
        convert_osworld(raw, source="t.json", fetch=no_fetch)
    assert caught.value.details["key"] == f"evaluator.result.{at}", caught.value.details


@pytest.mark.parametrize("name", sorted(set(TAB_GETTERS.values()) - {"html_parse"}))  # tests/test_osworld_chrome_html.py
def test_the_tabs_program_prints_nothing_when_no_browser_answers(name: str, tmp_path: Path) -> None:
    """No DevToolsActivePort, then one naming a port nobody listens on (a browser that ended): OSWorld's None/[].
    Run away from the checkout, as on the seat, where no cud is importable."""
    for _ in range(2):
        config = ['{"parse_keys": ["q"]}'] if name == "url_parse" else []
        done = subprocess.run([SYSTEM_PYTHON, "-c", program("chrome_tabs"), str(tmp_path), name, *config],
                              capture_output=True, timeout=60, check=True, cwd=tmp_path)
        assert done.stdout == (b"null" if name == "url_parse" else b""), done.stdout
        (tmp_path / "DevToolsActivePort").write_text("1\n/devtools/browser/x\n")


# -- on a seat -----------------------------------------------------------------------------------

#: A search page whose query has a value with a ' (which check_direct_json_object's reading turns into ").
SEARCH = "/search.html?city=O%27Hare&n=1,2&q=x"
#: A booking page with the DOM OSWorld's chrome/da46d875 reads: an appointment's h3 texts under class HAZ16 and the
#: name and mail inputs at the task's own XPaths, the inputs filled as the model would have.
BOOKING = ("<!doctype html><meta charset='utf-8'><title>Book</title><body><div>menu</div><div><div><form>"
           + "<div></div>" * 6 + "<div><div><div><div><input value=' James Smith '><input value=\"O'Neil@x\">"
           "</div></div></div></div></form></div></div><div class='HAZ16'><h3> Apply for a pass </h3></div>"
           "<div class='HAZ16'><h3>\nJanuary 04, 10:15 AM</h3></div></body>").encode()
PAGES = {"/one.html": b"<!doctype html><title>Page one</title><p>one</p>",
         "/book.html": BOOKING,
         "/two.html": b"<!doctype html><title>Page two</title><p>two</p>",
         SEARCH: b"<!doctype html><title>Search</title><p>found</p>"}
#: PAGES as the seat's template holds them, for its server.
PAGE_FILES = {f"pages{path.split('?')[0]}": body.decode() for path, body in PAGES.items()}
#: Prints the URL and title of each of the browser's pages, sorted, from its DevTools list (the port from its
#: profile): a page's title is there once the page came from the server.
LIST_PAGES = ("import json, urllib.request\n"
              "port = open('/home/user/.config/chromium/DevToolsActivePort').readline().strip()\n"
              "pages = json.load(urllib.request.urlopen('http://127.0.0.1:' + port + '/json/list'))\n"
              "print(' | '.join(sorted(p['url'] + ' ' + p['title'] for p in pages if p['type'] == 'page')))\n")
#: The port of the seat's web server, on the seat's own loopback.
PORT = 8765
#: Serves the home's pages/ (from the seat's template) on the seat's loopback, then waits until it answers.
SERVE = [{"type": "launch", "parameters": {"command": ["python3", "-m", "http.server", str(PORT), "--bind", "127.0.0.1",
                                                       "--directory", "pages"]}},
         {"type": "execute", "parameters": {"command": [
             "python3", "-c", "import socket, time\n"
             "for _ in range(600):\n"
             "    try:\n"
             f"        socket.create_connection(('127.0.0.1', {PORT}), timeout=1).close(); break\n"
             "    except OSError: time.sleep(0.1)\n"
             "else: raise SystemExit('the page server did not start')\n"]}}]


def chrome_task(task_id: str, base: str, evaluator: dict[str, Any]) -> dict[str, Any]:
    return {"id": task_id, "snapshot": "chrome", "instruction": "Look at the pages.", "source": "cud tests",
            "config": [*SERVE, *BOOKMARK_TASK["config"][:2],
                       {"type": "chrome_open_tabs", "parameters": {"urls_to_open": [f"{base}/one.html",
                                                                                    f"{base}/two.html"]}}],
            "trajectory": "trajectories/", "related_apps": ["chrome"], "evaluator": evaluator, "proxy": False}


@pytest.fixture(scope="module")
def served() -> Served:
    """Where the seat's tasks find :data:`PAGES`: the server :data:`SERVE` starts in the seat (its requests are not
    seen here)."""
    return Served(f"http://127.0.0.1:{PORT}")


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SpecSeat]:
    done = scenario({"message": "done"}, look_first=False)
    judge = seat_users.make()
    # The seat's network is tested: everything (the daemon, the model) in a namespace of this module's own.
    with own_network(), judge_python(judge) as python, \
            spec_seat(seat_users, done, config=f'[sessions]\njudge_user = "{judge.name}"\n',
                      template_files={**template_files(), **PAGE_FILES}, scenarios={"done": done}, python=python,
                      seat_config='network = "none"\n') as s:
        yield s


def evaluate(seat: SpecSeat, tasks: dict[str, dict[str, Any]], out: Path) -> dict[str, tuple[str, str]]:
    """``cuctl eval --from-osworld`` over ``tasks`` (chrome/ID.json each) and a scripted model that says it is done:
    each task's state and outcome."""
    root = out / "evaluation_examples"
    (root / "examples" / "chrome").mkdir(parents=True)
    for task_id, body in tasks.items():
        (root / "examples" / "chrome" / f"{task_id}.json").write_text(json.dumps(body))
    (root / "test_chrome.json").write_text(json.dumps({"chrome": list(tasks)}))
    done = cuctl(seat.daemon.socket, "eval", "--from-osworld", str(root / "test_chrome.json"), "--model",
                 "scripted:done", "--out", str(out / "out"), timeout=900)
    assert "Traceback" not in done.stderr, done.stderr
    runs = {r["spec"]: r for r in json.loads((out / "out" / "results.json").read_text())["runs"]}
    return {name: (r["state"], r["outcome"]) for name, r in runs.items()}


def test_the_converted_setup_opens_the_tabs_in_the_seats_chromium_and_closes_its_first_page(
        seat: SpecSeat, served: Served, tmp_path: Path) -> None:
    listed = {"type": "vm_command_line", "command": ["python3", "-c", LIST_PAGES]}
    both = f"{served.base}/one.html Page one | {served.base}/two.html Page two\n"
    tasks = {
        "tabs-open": chrome_task("tabs-open", served.base, {
            "func": "exact_match", "result": listed, "expected": {"type": "rule", "rules": {"expected": both}}}),
        "new-tab-kept": chrome_task("new-tab-kept", served.base, {
            "func": "check_include_exclude", "result": listed,
            "expected": {"type": "rule", "rules": {"include": ["chrome://"], "exclude": []}}}),
    }
    assert evaluate(seat, tasks, tmp_path) == {
        "chrome/tabs-open": ("succeeded", "passed"),
        "chrome/new-tab-kept": ("succeeded", "failed"),  # OSWorld closes the page the browser started with
    }


#: OSWorld's chrome/030eeff7 (Do Not Track), its config led by a command that sets the preference as the
#: browser's settings page would: Chromium starts on it, is ended by ``pkill chrome`` and started again
#: (the task's postconfig), and the getter reads the Preferences that Chromium wrote.
SET_DO_NOT_TRACK = ("import json; p = '/home/user/.config/chromium/Default/Preferences'; d = json.load(open(p)); "
                    "d['enable_do_not_track'] = True; json.dump(d, open(p, 'w'))")


def do_not_track_task(task_id: str, expected: str) -> dict[str, Any]:
    launch = BOOKMARK_TASK["config"][0]
    return {"id": task_id, "snapshot": "chrome", "instruction": "Turn on Do Not Track.", "source": "cud tests",
            "config": [{"type": "execute", "parameters": {"command": ["python3", "-c", SET_DO_NOT_TRACK]}},
                       *BOOKMARK_TASK["config"][:2]],
            "trajectory": "trajectories/", "related_apps": ["chrome"], "proxy": False,
            "evaluator": {"postconfig": [{"type": "launch", "parameters": {"command": ["pkill", "chrome"]}}, launch,
                                         {"type": "sleep", "parameters": {"seconds": 3}}],
                          "func": "exact_match", "result": {"type": "enable_do_not_track"},
                          "expected": {"type": "rule", "rules": {"expected": expected}}}}


def test_a_preferences_getter_reads_what_the_seats_chromium_wrote(seat: SpecSeat, tmp_path: Path) -> None:
    tasks = {"dnt-on": do_not_track_task("dnt-on", "true"), "dnt-off": do_not_track_task("dnt-off", "false")}
    assert evaluate(seat, tasks, tmp_path) == {"chrome/dnt-on": ("succeeded", "passed"),
                                               "chrome/dnt-off": ("succeeded", "failed")}


#: Writes a Bookmarks file (Chromium's format) with the transformer page on the bookmark bar.
SET_BOOKMARK = ("import json; p = '/home/user/.config/chromium/Default/Bookmarks'; json.dump({'version': 1, 'roots': "
                "{'bookmark_bar': {'type': 'folder', 'name': 'Bookmarks bar', 'children': [{'type': 'url', 'name': "
                "'The Illustrated Transformer', 'url': 'https://jalammar.github.io/illustrated-transformer/'}]}, "
                "'other': {'type': 'folder', 'name': 'Other bookmarks', 'children': []}}}, open(p, 'w'))")


def bookmark_task(task_id: str, urls: list[str]) -> dict[str, Any]:
    """OSWorld's 7a5a7856 without its network tabs, led by a command that bookmarks the page it asks for."""
    evaluator = BOOKMARK_TASK["evaluator"]
    return {"id": task_id, "snapshot": "chrome", "instruction": BOOKMARK_TASK["instruction"], "source": "cud tests",
            "config": [{"type": "execute", "parameters": {"command": ["python3", "-c", SET_BOOKMARK]}},
                       *BOOKMARK_TASK["config"][:2]],
            "trajectory": "trajectories/", "related_apps": ["chrome"], "proxy": False,
            "evaluator": {**evaluator, "expected": {"type": "rule", "rules": {"type": "bookmark_bar_websites_urls",
                                                                              "urls": urls}}}}


def test_is_expected_bookmarks_reads_the_bookmarks_the_seats_chromium_kept(seat: SpecSeat, tmp_path: Path) -> None:
    tasks = {"saved": bookmark_task("saved", [URLS[1]]), "other": bookmark_task("other", URLS)}
    assert evaluate(seat, tasks, tmp_path) == {"chrome/saved": ("succeeded", "passed"),
                                               "chrome/other": ("succeeded", "failed")}


#: Brings the tab of one.html to the front through the browser's DevTools, as a user's click on it would.
ACTIVATE_ONE = ("import json, urllib.request\n"
                "base = 'http://127.0.0.1:' + open('/home/user/.config/chromium/DevToolsActivePort').readline().strip()\n"
                "page = next(p for p in json.load(urllib.request.urlopen(base + '/json/list'))"
                " if p['url'].endswith('/one.html'))\n"
                "urllib.request.urlopen(base + '/json/activate/' + page['id']).read()\n")


def tab_task(task_id: str, base: str, evaluator: dict[str, Any], activate_one: bool = False) -> dict[str, Any]:
    task = chrome_task(task_id, base, evaluator)
    if activate_one:
        task["config"].append({"type": "execute", "parameters": {"command": ["python3", "-c", ACTIVATE_ONE]}})
    return task


def test_the_tab_getters_read_the_seats_chromium(seat: SpecSeat, served: Served, tmp_path: Path) -> None:
    """The tab opened last is in front, until another is brought there: /json/list's order is the tabs'
    activation, not their opening."""
    one, two = f"{served.base}/one.html", f"{served.base}/two.html"
    at = {"type": "active_url_from_accessTree", "goto_prefix": "https://www."}
    info = {"type": "active_tab_info", "goto_prefix": "https://www."}
    tabs = {"type": "open_tabs_info"}

    def rule(rules: dict[str, Any]) -> dict[str, Any]:
        return {"type": "rule", "rules": rules}

    tasks = {
        "pattern-two": tab_task("pattern-two", served.base, {
            "func": "is_expected_url_pattern_match", "result": at,
            "expected": rule({"expected": ["^http://127\\.0\\.0\\.1:", "/two\\.html$"]})}),
        "pattern-one": tab_task("pattern-one", served.base, {
            "func": "is_expected_url_pattern_match", "result": at, "expected": rule({"expected": ["/one\\.html$"]})}),
        "front-one": tab_task("front-one", served.base, {
            "func": "is_expected_active_tab", "result": info, "expected": rule({"type": "url", "url": one})},
            activate_one=True),
        "front-two": tab_task("front-two", served.base, {
            "func": "is_expected_active_tab", "result": info, "expected": rule({"type": "url", "url": two})},
            activate_one=True),
        "tabs-both": tab_task("tabs-both", served.base, {
            "func": "is_expected_tabs", "result": tabs, "expected": rule({"type": "url", "urls": [two, one]})}),
        "tabs-one": tab_task("tabs-one", served.base, {
            "func": "is_expected_tabs", "result": tabs, "expected": rule({"type": "url", "urls": [one]})}),
    }
    assert evaluate(seat, tasks, tmp_path) == {
        "chrome/pattern-two": ("succeeded", "passed"), "chrome/pattern-one": ("succeeded", "failed"),
        "chrome/front-one": ("succeeded", "passed"), "chrome/front-two": ("succeeded", "failed"),
        "chrome/tabs-both": ("succeeded", "passed"), "chrome/tabs-one": ("succeeded", "failed"),
    }


def test_active_tab_url_parse_reads_the_front_tabs_query(seat: SpecSeat, served: Served, tmp_path: Path) -> None:
    """OSWorld's 82bc8d6a and f5d96daf in one: renamed keys, values split at commas."""
    result = {"type": "active_tab_url_parse", "goto_prefix": "https://www.", "parse_keys": ["city", "n"],
              "replace": {"n": "numbers"}, "split_list": True}

    def task(task_id: str, city: str) -> dict[str, Any]:
        body = chrome_task(task_id, served.base, {
            "func": "check_direct_json_object", "result": result,
            "expected": {"type": "rule", "rules": {"expected": {"city": [city], "numbers": ["1", "2"]}}}})
        body["config"][-1]["parameters"]["urls_to_open"] = [f"{served.base}/one.html", served.base + SEARCH]
        return body

    assert evaluate(seat, {"ohare": task("ohare", "O'Hare"), "paris": task("paris", "Paris")}, tmp_path) == {
        "chrome/ohare": ("succeeded", "passed"), "chrome/paris": ("succeeded", "failed")}


def test_active_tab_html_parse_reads_the_front_tabs_dom(seat: SpecSeat, served: Served, tmp_path: Path) -> None:
    """OSWorld's da46d875 getters (its XPaths, its class and h3 rule) on the page in front; a ' in an input's value
    reaches check_direct_json_object intact."""
    inputs = {"type": "active_tab_html_parse", "category": "input", "inputObject": {
        "/html/body/div[2]/div/form/div[7]/div/div/div[1]/input[1]": "name",
        "/html/body/div[2]/div/form/div[7]/div/div/div[1]/input[2]": "mail"}}
    slots = {"type": "active_tab_html_parse", "category": "class",
             "class_multiObject_only_child": {"HAZ16": {"0": "content", "1": "time"}}}

    def task(task_id: str, mail: str, time: str) -> dict[str, Any]:
        body = chrome_task(task_id, served.base, {
            "func": ["check_direct_json_object", "check_direct_json_object"], "result": [inputs, slots],
            "expected": [{"type": "rule", "rules": {"expected": {"name": "James Smith", "mail": mail}}},
                         {"type": "rule", "rules": {"expected": {"content": "Apply for a pass", "time": time}}}]})
        body["config"][-1]["parameters"]["urls_to_open"] = [f"{served.base}/one.html", f"{served.base}/book.html"]
        return body

    assert evaluate(seat, {"booked": task("booked", "O'Neil@x", "January 04, 10:15 AM"),
                           "other-mail": task("other-mail", "x@x", "January 04, 10:15 AM"),
                           "other-time": task("other-time", "O'Neil@x", "10:15 AM")}, tmp_path) == {
        "chrome/booked": ("succeeded", "passed"), "chrome/other-mail": ("succeeded", "failed"),
        "chrome/other-time": ("succeeded", "failed")}
