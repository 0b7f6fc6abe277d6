"""OSWorld's evaluators converted (cud/osworld/evaluator.py): metric checks and their getters, options, native
checks, ``conj``, ``postconfig`` and ``infeasible``; every refusal by name. Each converted spec is parsed."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cud.errors import SpecError
from cud.osworld.catalog import METRICS
from cud.osworld.convert import convert_osworld
from cud.osworld.evaluator import INFEASIBLE, INFEASIBLE_WORDS, LIST_TREE, STDERR_ONLY
from cud.osworld.steps import ANY_STATUS, RUN_SECONDS, wrap
from cud.spec import parse_spec
from cud.spec.matching import Match

URL = "https://example.invalid/gold.xlsx"
FILE = {"type": "vm_file", "path": "/home/user/Desktop/out.xlsx", "dest": "out.xlsx"}
CLOUD = {"type": "cloud_file", "path": URL, "dest": "gold.xlsx"}


def task(evaluator: dict[str, Any]) -> dict[str, Any]:
    return {"id": "t-1", "instruction": "do it", "config": [], "evaluator": evaluator}


def fetch(url: str) -> bytes:
    return b"gold:" + url.encode()


def convert(evaluator: dict[str, Any]) -> dict[str, Any]:
    converted = convert_osworld(task(evaluator), source="t.json", fetch=fetch)
    parse_spec(dict(converted))
    return converted


def checks(evaluator: dict[str, Any]) -> list[dict[str, Any]]:
    return list(convert(evaluator)["checks"])


def refused(evaluator: object, *names: str) -> str:
    with pytest.raises(SpecError) as caught:
        convert_osworld(task(evaluator), source="t.json", fetch=fetch)  # type: ignore[arg-type]
    for name in names:
        assert name in caught.value.message, caught.value.message
    return caught.value.message


# -- metrics and getters -------------------------------------------------------------------------

NATIVE_METRICS = {"exact_match", "check_include_exclude"}  # on vm_command_line: cud's own command check


@pytest.mark.parametrize("metric", sorted(METRICS))
def test_every_catalog_metric_converts_to_a_metric_check_on_a_file_and_a_fixture(metric: str) -> None:
    if not METRICS[metric].expected:  # a metric of the result alone: an expected getter is refused
        refused({"func": metric, "result": FILE, "expected": CLOUD}, "takes no expected value")
        (check,) = convert({"func": metric, "result": FILE})["checks"]
        assert check == {"name": f"{metric} on vm_file", "metric": metric, "result": {"file": "Desktop/out.xlsx"}}
        return
    converted = convert({"func": metric, "result": FILE, "expected": CLOUD})
    (check,) = converted["checks"]
    assert check == {"name": f"{metric} on vm_file", "metric": metric, "result": {"file": "Desktop/out.xlsx"},
                     "expected": {"fixture": URL}}
    assert converted.files == {URL: fetch(URL)}  # the cloud file, fetched here
    (parsed,) = parse_spec(dict(converted)).checks
    assert parsed.kind == "metric" and parsed.metric == metric


@pytest.mark.parametrize(("getter", "argument"), [
    (FILE, {"file": "Desktop/out.xlsx"}),
    ({"type": "vm_file", "path": "Desktop/x.csv", "dest": "x.csv", "multi": True, "path_": None}, None),
    (CLOUD, {"fixture": URL}),
    ({"type": "rule", "rules": {"expected": ["a", 1, None]}}, {"value": {"expected": ["a", 1, None]}}),
    ({"type": "vm_command_line", "command": "cat '/home/user/a b'"},
     {"command": wrap(ANY_STATUS[2], ["cat", "/home/user/a b"], rewrite=True)}),
    ({"type": "vm_command_line", "command": "ls | wc -l", "shell": True},
     {"command": [*ANY_STATUS, "/bin/sh", "-c", "ls | wc -l"]}),
    ({"type": "vm_command_error", "command": ["python", "x.py"]},
     {"command": ["/bin/sh", "-c", STDERR_ONLY, "osworld", "python", "x.py"]}),
    ({"type": "vm_file", "path": ["/home/user/a.docx"], "dest": ["a.docx"], "multi": "true"}, {"file": "a.docx"}),
])
def test_each_getter_becomes_a_metric_checks_argument(getter: dict[str, Any], argument: dict[str, Any] | None) -> None:
    if argument is None:  # an unknown getter key is refused by name
        refused({"func": "compare_csv", "result": getter, "expected": CLOUD}, "'path_'")
        return
    for role in ("result", "expected"):
        evaluator = {"func": "compare_csv", "result": FILE, "expected": CLOUD, role: getter}
        (check,) = checks(evaluator)
        assert check[role] == argument


def test_vm_command_error_gives_the_commands_errors_whatever_its_status() -> None:
    done = subprocess.run(["/bin/sh", "-c", STDERR_ONLY, "osworld", "sh", "-c", "echo out; echo err >&2; exit 2"],
                          capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "err\n")


@pytest.mark.parametrize(("metric", "option"), sorted((m, o) for m, info in METRICS.items() for o in info.options))
def test_every_option_the_catalog_knows_is_kept(metric: str, option: str) -> None:
    value: Any = [] if option == "rules" else True
    (check,) = checks({"func": metric, "result": FILE, "expected": CLOUD, "options": {option: value, "_note": "x"}})
    assert check["options"] == {option: value}  # the note (a '_' key OSWorld's **options ignores) left out


@pytest.mark.parametrize(("evaluator", "names"), [
    ({"func": "compare_csv", "result": FILE, "expected": CLOUD, "options": {"fuzzy": 1}}, ["'fuzzy'", "compare_csv"]),
    ({"func": "compare_table", "result": FILE, "expected": CLOUD, "options": {"rules": [{"type": "nope"}]}},
     ["'nope'"]),
    ({"func": "compare_pptx_files", "result": FILE, "expected": CLOUD, "options": {"examine_everything": True}},
     ["'examine_everything'"]),
    ({"func": "compare_csv", "result": FILE, "expected": CLOUD, "options": [1]}, ["evaluator.options"]),
    ({"func": "no_such_metric", "result": FILE, "expected": CLOUD}, ["'no_such_metric'", "evaluator.func"]),
    ({"func": "compare_csv", "result": {"type": "vm_terminal_output"}, "expected": CLOUD},
     ["getter 'vm_terminal_output'", "evaluator.result", "accessibility tree"]),
    ({"func": "compare_csv", "result": {"type": "cache_file", "path": "x"}, "expected": CLOUD},
     ["'cache_file'", "host cache"]),
    ({"func": "compare_csv", "result": FILE, "expected": {"type": "googledrive_file", "path": "x"}},
     ["'googledrive_file'", "Google Drive", "evaluator.expected"]),
    ({"func": "compare_table", "result": {**FILE, "path": ["/home/user/a.xlsx", "/home/user/b.csv"],
                                          "dest": ["a.xlsx", "a/b.csv"], "multi": True}, "expected": CLOUD},
     ["evaluator.result.dest[1]", "'a/b.csv'"]),
    ({"func": "compare_table", "result": FILE}, ["evaluator.expected is missing"]),
    ({"func": "check_python_file_by_test_suite", "result": FILE, "expected": CLOUD},
     ["'check_python_file_by_test_suite'", "judge's process", "evaluator.func"]),
    ({"func": "compare_csv", "result": {**FILE, "path": "/etc/passwd"}, "expected": CLOUD}, ["'/etc/passwd'"]),
    ({"func": "compare_csv", "result": {"type": "vm_command_line", "command": "echo {CLIENT_PASSWORD}"},
      "expected": CLOUD}, ["{CLIENT_PASSWORD}"]),
    ({"func": "exact_match", "result": {"type": "vm_command_line", "command": ["true"]},
      "expected": {"type": "rule", "rules": {"expected": "x"}}, "options": {"fuzzy": 1}}, ["'fuzzy'"]),
    ({"func": "exact_match", "result": {"type": "list_directory", "path": "/home/user/a"},
      "expected": {"type": "vm_file", "path": "/home/user/b"}}, ["expected type 'vm_file'"]),
    ({"func": ["compare_csv"], "conj": "xor", "result": [FILE], "expected": [CLOUD]}, ["evaluator.conj", "'xor'"]),
    ({"func": ["compare_csv", "compare_csv"], "result": [FILE], "expected": [CLOUD, CLOUD]},
     ["evaluator.result must be a list as long as evaluator.func (2)"]),
    ({"func": "compare_csv", "result": FILE, "expected": CLOUD, "notes": "x"}, ["OSWorld evaluator key 'notes'"]),
])
def test_evaluators_without_a_counterpart_are_refused_by_name(evaluator: dict[str, Any], names: list[str]) -> None:
    refused(evaluator, *names)


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=30), st.sampled_from(["func", "getter"]))
@example("infeasible_or_not", "func")
@example("vm_terminal_output", "getter")
def test_every_unknown_metric_and_getter_is_refused_naming_it(name: str, where: str) -> None:
    if where == "func" and name not in METRICS and name != "infeasible":
        refused({"func": name, "result": FILE, "expected": CLOUD}, repr(name), "metric")
    elif where == "getter" and name not in ("vm_file", "cloud_file", "rule", "vm_command_line", "vm_command_error",
                                            "list_directory", "gimp_config_file", "vscode_config", "vm_wallpaper"):
        refused({"func": "compare_csv", "result": {"type": name}, "expected": CLOUD}, repr(name), "getter")


# -- several files (multi), GIMP's config file ---------------------------------------------------

GOLD = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/libreoffice_calc/" \
       "6e99a1ad-07d2-4b66-a1ce-ece6d99c20a5/"
#: evaluation_examples/examples/libreoffice_calc/6e99a1ad-07d2-4b66-a1ce-ece6d99c20a5.json's evaluator, as OSWorld has it.
KEEP_TWO_DECIMALS = {
    "func": "compare_table",
    "result": {"type": "vm_file", "path": ["/home/user/Keep_Two_decimal_points.xlsx",
                                           "/home/user/Keep_Two_decimal_points-Sheet1.csv"],
               "dest": ["Keep_Two_decimal_points.xlsx", "Keep_Two_decimal_points-Sheet1.csv"], "multi": True},
    "expected": {"type": "cloud_file", "path": [f"{GOLD}Keep_Two_decimal_points_gold.xlsx",
                                                f"{GOLD}Keep_Two_decimal_points_gold-Sheet1.csv"],
                 "dest": ["Keep_Two_decimal_points_gold.xlsx", "Keep_Two_decimal_points_gold-Sheet1.csv"],
                 "multi": True},
    "options": {"rules": [{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}]}}
#: evaluation_examples/examples/multi_apps/82e3c869-49f6-4305-a7ce-f3e64a0618e7.json's, its four images cut to two.
PHOTOS = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/multi_apps/" \
         "82e3c869-49f6-4305-a7ce-f3e64a0618e7/"
PRESENTER = {
    "func": "compare_image_list",
    "result": {"type": "vm_file", "path": ["/home/user/Desktop/presenter/DSC00657.jpg",
                                           "/home/user/Desktop/presenter/DSC00574.jpg"],
               "dest": ["DSC00657.jpg", "DSC00574.jpg"], "multi": "true"},
    "expected": {"type": "cloud_file", "path": [f"{PHOTOS}DSC00657.jpg", f"{PHOTOS}DSC00574.jpg"],
                 "dest": ["DSC00657_gold.jpg", "DSC00574_gold.jpg"], "multi": "true", "gives": [0, 1]},
    "options": None}


def test_a_multi_getter_copies_every_file_under_its_dest_and_gives_the_metric_its_gives() -> None:
    """file.py: every file fetched into the cache under its dest; ``gives`` (default [0]) picks what the metric gets."""
    converted = convert(KEEP_TWO_DECIMALS)
    (check,) = converted["checks"]
    assert check == {
        "name": "compare_table on vm_file", "metric": "compare_table",
        "result": {"files": ["Keep_Two_decimal_points.xlsx", "Keep_Two_decimal_points-Sheet1.csv"],
                   "names": ["Keep_Two_decimal_points.xlsx", "Keep_Two_decimal_points-Sheet1.csv"], "gives": [0]},
        "expected": {"fixtures": [f"{GOLD}Keep_Two_decimal_points_gold.xlsx",
                                  f"{GOLD}Keep_Two_decimal_points_gold-Sheet1.csv"],
                     "names": ["Keep_Two_decimal_points_gold.xlsx", "Keep_Two_decimal_points_gold-Sheet1.csv"],
                     "gives": [0]},
        "options": KEEP_TWO_DECIMALS["options"]}
    assert set(converted.files) == set(check["expected"]["fixtures"])  # both gold files fetched here
    (parsed,) = parse_spec(dict(converted)).checks
    assert parsed.expected is not None and parsed.expected.names[1] == "Keep_Two_decimal_points_gold-Sheet1.csv"
    assert parse_spec(dict(converted)).local_files() == {url: f"checks[0].expected.fixtures[{i}]"
                                                         for i, url in enumerate(check["expected"]["fixtures"])}
    (images,) = checks(PRESENTER)
    assert images["result"] == {"files": ["Desktop/presenter/DSC00657.jpg", "Desktop/presenter/DSC00574.jpg"],
                                "names": ["DSC00657.jpg", "DSC00574.jpg"], "gives": [0]}
    assert images["expected"]["names"] == ["DSC00657_gold.jpg", "DSC00574_gold.jpg"]
    assert images["expected"]["gives"] == [0, 1]


@pytest.mark.parametrize(("gives", "picked"), [([1, 0, 1], [0, 1]), ([2, 7], [2]), ([-1, 1], [1]), (None, [0])])
def test_gives_is_the_set_of_indexes_file_py_returns_in_file_order(gives: list[int] | None, picked: list[int]) -> None:
    """``gives`` is a set tested against each index in turn: the order, repeats and indexes past the end go."""
    getter = {"type": "vm_file", "path": ["/home/user/a", "/home/user/b", "/home/user/c"], "dest": ["a", "b", "c"],
              "multi": True, **({"gives": gives} if gives is not None else {})}
    (check,) = checks({"func": "compare_csv", "result": getter, "expected": CLOUD})
    assert check["result"] == {"files": ["a", "b", "c"], "names": ["a", "b", "c"], "gives": picked}


@pytest.mark.parametrize(("getter", "names"), [
    ({"dest": ["a", "a"]}, ["evaluator.result.dest[1]", "'a'", "evaluator.result.dest[0]"]),
    ({"dest": ["a", ".."]}, ["evaluator.result.dest[1]", "'..'"]),
    ({"dest": ["a", ""]}, ["evaluator.result.dest[1]"]),
    ({"dest": ["a"]}, ["evaluator.result.dest", "each of the 2 files"]),
    ({"dest": "a"}, ["evaluator.result.dest", "a list of strings"]),
    ({"path": ["/home/user/a", "/etc/shadow"]}, ["evaluator.result.path[1]", "'/etc/shadow'"]),
    ({"gives": [5]}, ["evaluator.result.gives", "picks none"]),
    ({"gives": [True]}, ["evaluator.result.gives", "indexes"]),
])
def test_a_multi_getter_that_cannot_be_copied_side_by_side_is_refused_naming_the_value(
        getter: dict[str, Any], names: list[str]) -> None:
    base = {"type": "vm_file", "path": ["/home/user/a", "/home/user/b"], "dest": ["a", "b"], "multi": True}
    refused({"func": "compare_csv", "result": {**base, **getter}, "expected": CLOUD}, *names)


def test_gimp_config_file_is_the_file_in_gimps_config_folder_of_the_home() -> None:
    """evaluation_examples/examples/gimp/7b7617bd-57cc-468e-9c91-40c4ec2bcb3d.json's evaluator; gimp.py reads
    ~/.config/GIMP/2.10/<file_name> of the VM user's home."""
    evaluator = {"func": "check_config_status", "result": {"type": "gimp_config_file", "file_name": "gimprc",
                                                           "dest": "gimprc"},
                 "expected": {"type": "rule", "rules": {"type:": "key-value", "key": "undo-levels", "value": "100"}},
                 "options": None}
    (check,) = checks(evaluator)
    assert check == {"name": "check_config_status on gimp_config_file", "metric": "check_config_status",
                     "result": {"file": ".config/GIMP/2.10/gimprc"},
                     "expected": {"value": {"type:": "key-value", "key": "undo-levels", "value": "100"}}}
    for bad in ("../../../etc/passwd", "", None):
        refused({**evaluator, "result": {**evaluator["result"], "file_name": bad}}, "evaluator.result.file_name")


# -- cud's own checks for exact pairs ------------------------------------------------------------


def test_include_exclude_and_exact_match_on_a_command_are_cuds_command_checks() -> None:
    grep, tail = checks({
        "func": ["check_include_exclude", "exact_match"],
        "result": [{"type": "vm_command_line", "command": ["grep", "-c", "done", "/home/user/n.txt"]},
                   {"type": "vm_command_line", "command": "tail -n 1 ~/n.txt", "shell": True}],
        "expected": [{"type": "rule", "rules": {"include": ["1", ""], "exclude": ["0"]}},
                     {"type": "rule", "rules": {"expected": "done\n"}}]})
    assert grep == {"name": "check_include_exclude on vm_command_line",
                    "command": wrap(ANY_STATUS[2], ["grep", "-c", "done", "/home/user/n.txt"], rewrite=True),
                    "output": {"include": ["1"], "exclude": ["0"]}}  # '' is in every output: dropped
    assert tail["command"] == [*ANY_STATUS, "/bin/sh", "-c", "tail -n 1 ~/n.txt"]
    assert Match.parse(tail["output"]["matches"]).test("done\n")
    assert not Match.parse(tail["output"]["matches"]).test("done\n\n")
    refused({"func": "check_include_exclude", "result": {"type": "vm_command_line", "command": ["true"]},
             "expected": {"type": "rule", "rules": {"exclude": [""]}}}, "could never pass")


def test_exact_match_on_list_directory_lists_the_tree() -> None:
    (tree,) = checks({"func": "exact_match", "result": {"type": "list_directory", "path": "/home/user/Documents"},
                      "expected": {"type": "rule", "rules": {"expected": {
                          "type": "directory", "name": "Documents",
                          "children": [{"type": "directory", "name": "e", "children": [{"type": "file", "name": "f"}]}]}}}})
    assert tree["command"] == [*LIST_TREE, "Documents"]
    assert Match.parse(tree["output"]["matches"]).test("d e\nf e/f\n")


# -- conj, postconfig, infeasible ----------------------------------------------------------------


def test_conj_or_is_pass_if_any_and_and_the_default() -> None:
    evaluator = {"func": ["compare_csv", "compare_docx_files"], "result": [FILE, FILE], "expected": [CLOUD, CLOUD],
                 "options": [{}, {"ignore_case": True}]}
    converted = convert({**evaluator, "conj": "or"})
    assert converted["pass_if"] == "any" and parse_spec(dict(converted)).pass_if == "any"
    assert "pass_if" not in convert(evaluator) and parse_spec(dict(convert({**evaluator, "conj": "and"}))).pass_if == "all"
    assert [c["metric"] for c in converted["checks"]] == ["compare_csv", "compare_docx_files"]
    assert converted["checks"][1]["options"] == {"ignore_case": True}


def test_postconfig_is_setup_after_the_model_converted_as_config() -> None:
    """The pyautogui ctrl+s of OSWorld's office tasks stays a command: the seat's python has pyautogui."""
    save = ["python", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 's'); pyautogui.click({SCREEN_WIDTH_HALF}, 1)"]
    converted = convert({"func": "compare_csv", "result": FILE, "expected": CLOUD, "postconfig": [
        {"type": "activate_window", "parameters": {"window_name": "out.xlsx - LibreOffice Calc", "strict": True}},
        {"type": "sleep", "parameters": {"seconds": 0.5}},
        {"type": "execute", "parameters": {"command": save}},
        {"type": "download", "parameters": {"files": [{"url": URL, "path": "/home/user/gold.xlsx"}]}}]})
    activate, sleep, execute, download = converted["postconfig"]
    assert activate["run"][-2:] == ["-Fa", "out.xlsx - LibreOffice Calc"]
    assert sleep == {"sleep": 0.5}
    assert execute == {"run": [*ANY_STATUS, *save[:2], save[2].replace("{SCREEN_WIDTH_HALF}", "960")],
                       "timeout": RUN_SECONDS}
    assert download == {"files": [{"src": URL, "dest": "gold.xlsx"}]}
    spec = parse_spec(dict(converted))
    assert [s.kind for s in spec.postconfig] == ["run", "sleep", "run", "files"]
    assert spec.local_files() == {URL: "postconfig[3].files[0].src"}
    refused({"func": "compare_csv", "result": FILE, "expected": CLOUD,
             "postconfig": [{"type": "chrome_close_tabs", "parameters": {}}]},
            "'chrome_close_tabs'", "evaluator.postconfig[0]")


def test_infeasible_is_an_answer_check_on_openai_runners_words() -> None:
    converted = convert({"func": "infeasible", "result": {}, "expected": {}})
    assert converted["checks"] == [{"name": "infeasible", "answer": INFEASIBLE}]
    (parsed,) = parse_spec(dict(converted)).checks
    assert parsed.kind == "answer"
    assert "fail_if_answer" not in converted  # declaring it infeasible is what passes it


@pytest.mark.parametrize("conj", ["and", "or"])
def test_a_feasible_task_is_failed_by_a_final_message_openais_runner_makes_fail(conj: str) -> None:
    """evaluate(): a feasible task whose last action is FAIL scores 0, whatever its metrics and conj."""
    spec = parse_spec(dict(convert({"func": ["compare_csv", "compare_csv"], "conj": conj, "result": [FILE, FILE],
                                    "expected": [CLOUD, CLOUD]})))
    assert spec.fail_if_answer == Match.parse(INFEASIBLE)
    assert spec.pass_if == ("any" if conj == "or" else "all")


def declares(text: str) -> bool:
    """mm_agents/openai_cua_agent.py, OpenAICUAAgent.predict: the message that becomes FAIL."""
    return any(word in text.lower() for word in INFEASIBLE_WORDS)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(INFEASIBLE_WORDS).flatmap(
    lambda w: st.lists(st.booleans(), min_size=len(w), max_size=len(w)).map(
        lambda up: "".join(c.upper() if u else c for c, u in zip(w, up, strict=True)))),
    st.text(max_size=8), st.sampled_from(["İ", "K", "ß", "not  feasible", "in feasible", "feasible"])), max_size=6)
    .map("".join))
@example("The task is INFEASIBLE.")
@example("İmpossible")
@example("done")
def test_the_answer_check_passes_exactly_when_openais_runner_declares_fail(text: str) -> None:
    assert Match.parse(INFEASIBLE).test(text) == declares(text)


def test_a_spec_with_every_kind_of_part_round_trips_through_json() -> None:
    converted = convert({"func": ["compare_csv", "exact_match"], "conj": "or",
                         "result": [FILE, {"type": "vm_command_line", "command": ["true"]}],
                         "expected": [CLOUD, {"type": "rule", "rules": {"expected": ""}}],
                         "postconfig": [{"type": "sleep", "parameters": {"seconds": 1}}]})
    again = parse_spec(json.loads(json.dumps(dict(converted))))
    assert again == parse_spec(dict(converted))
