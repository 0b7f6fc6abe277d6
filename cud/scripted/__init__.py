"""A scripted stand-in for the Responses API, for tests, benchmarks and the keyless demo.

Point any openai client at it (``OPENAI_BASE_URL=http://127.0.0.1:PORT/v1``)::

    with ScriptedModel("demo") as model:
        client = OpenAI(base_url=model.base_url, api_key="any")

The scenario format is described in :mod:`cud.scripted.scenario`; the command line
is ``python -m cud.scripted --scenario FILE|NAME [--scenarios DIR]``; a request whose model is
``scripted:NAME`` plays the scenario NAME (docs/scripted-model.md).
"""

from cud.scripted.scenario import Scenario, bundled_names, load_scenario, parse_scenario, scenario_folder
from cud.scripted.server import MODEL_PREFIX, ScriptedModel

__all__ = ["MODEL_PREFIX", "ScriptedModel", "Scenario", "bundled_names", "load_scenario", "parse_scenario",
           "scenario_folder"]
