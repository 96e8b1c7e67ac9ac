"""Task specs: the TOML file that fixes a run's task, policy, environment, planner and verifier.

The curated surface of the package; the modules below never import it back:

* :mod:`runtime.taskspec.models` -- :class:`TaskSpec` and its sections, validated once, each
  plug-in's options by the model the plug-in declares (DESIGN.md section 5.10);
* :mod:`runtime.taskspec.builtin_options` -- the options models of Ratchet's own plug-ins;
* :mod:`runtime.taskspec.loading` -- :func:`load_task_spec`: a TOML file to a spec, with errors
  naming each bad field by its TOML path (:mod:`runtime.plugins.validation_errors`);
* :mod:`runtime.taskspec.paths` -- safe relative paths and ``allowed_paths`` globs;
* :mod:`runtime.taskspec.policy` -- :func:`policy_check` and :func:`needs_approval` (DESIGN.md
  section 6);
* :mod:`runtime.taskspec.fingerprint` -- :func:`scenario_fingerprint` (DESIGN.md section 3).
* :mod:`runtime.taskspec.writing` -- TOML text from data (:func:`toml_dumps`) and the one
  git-history replay task every tool writes (:func:`replay_task_write`).

Framework-free: nothing here imports Django.
"""

from runtime.taskspec.builtin_options import (
    AlwaysVerifier,
    FilesEqualVerifier,
    GitHistoryPlannerSpec,
    NoOptions,
    ScriptedPlannerSpec,
    ScriptedStep,
    TreeEqualsSourceVerifier,
)
from runtime.taskspec.fingerprint import (
    SCENARIO_FINGERPRINT_VERSION,
    ObservedInitialState,
    scenario_fingerprint,
)
from runtime.taskspec.loading import SHIPPED_TASKS_DIR, load_task_spec
from runtime.taskspec.models import (
    MAX_LAST_COMMITS,
    TASK_SPEC_SCHEMA_VERSION,
    BudgetsSection,
    EnvironmentSection,
    PluginSection,
    PolicySection,
    TaskSection,
    TaskSpec,
    VersionsSection,
    spec_plugin,
    validate_task_spec,
)
from runtime.taskspec.paths import (
    glob_match,
    invisible_characters,
    path_allowed,
    relative_path_problem,
    spec_path_problem,
)
from runtime.taskspec.policy import (
    FILE_ACTION_KINDS,
    PolicyScope,
    action_paths,
    needs_approval,
    policy_check,
)

__all__ = [
    "FILE_ACTION_KINDS",
    "MAX_LAST_COMMITS",
    "SCENARIO_FINGERPRINT_VERSION",
    "SHIPPED_TASKS_DIR",
    "TASK_SPEC_SCHEMA_VERSION",
    "AlwaysVerifier",
    "BudgetsSection",
    "EnvironmentSection",
    "FilesEqualVerifier",
    "GitHistoryPlannerSpec",
    "NoOptions",
    "ObservedInitialState",
    "PluginSection",
    "PolicyScope",
    "PolicySection",
    "ScriptedPlannerSpec",
    "ScriptedStep",
    "TaskSection",
    "TaskSpec",
    "TreeEqualsSourceVerifier",
    "VersionsSection",
    "action_paths",
    "glob_match",
    "invisible_characters",
    "load_task_spec",
    "needs_approval",
    "path_allowed",
    "policy_check",
    "relative_path_problem",
    "scenario_fingerprint",
    "spec_path_problem",
    "spec_plugin",
    "validate_task_spec",
]
