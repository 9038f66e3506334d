"""Write the corpus of malformed protocols in ``tests/protocols_malformed/``.

Each file is ``protocols/demo.toml`` with one realistic mistake. Its first two lines say
what is wrong and which field and line the error must name::

    # malformed: a misspelt key in [study]
    # expect: study.nmae @ 9

``tests/protocol/test_protocol_corpus.py`` checks every file against its ``expect`` line. Run this
script again (``python tests/make_malformed_protocols.py``) after a change to the demo
protocol that every file should share, e.g. a new required section.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "protocols" / "demo.toml"
CORPUS = Path(__file__).resolve().parent / "protocols_malformed"
HEADER_LINES = 2


@dataclass(frozen=True)
class Case:
    """``old`` replaced by ``new`` once (``old`` a regular expression when ``pattern``,
    for values other work changes, such as timings; ``occurrence`` counts from 0); the
    error names ``field`` on the line holding ``anchor`` (default: the first line of
    ``new``, searched from the change onwards)."""

    name: str
    what: str
    old: str
    new: str
    field: str
    anchor: str | None = None
    pattern: bool = False
    occurrence: int = 0


def cut(start: str, end: str | None) -> Callable[[str], tuple[str, int]]:
    """Remove the text from ``start`` up to (not including) ``end``, or to the file's end."""
    def apply(text: str) -> tuple[str, int]:
        begin = text.index(start)
        stop = len(text) if end is None else text.index(end, begin)
        return text[:begin] + text[stop:], begin
    return apply


ITEM_AGE = 'id = "age"\nlabel = "Age"\nkind = "number"\nmin = 16\nmax = 110\n'
SECOND_CONDITION = '[[conditions]]\nid = "fair"\nalgorithm = "fair"'


def declaring(name: str, what: str, table: str, field: str, anchor: str,
              runs: str = "fair") -> Case:
    """An ``[[algorithms]]`` table (``table``: its keys) before the second condition, which
    runs ``runs``; the error names ``field`` on the line of ``anchor``."""
    return Case(name, what, SECOND_CONDITION,
                f'[[algorithms]]\n{table}\n\n[[conditions]]\nid = "fair"\nalgorithm = "{runs}"',
                field, anchor)


def coded(name: str, what: str, source: str) -> Case:
    """A goal reward given as code (tests/goal_rewards_example.py) that the check refuses."""
    return declaring(name, what, f'id = "coded"\npython = "{source}"', "algorithms.0.python",
                     f'python = "{source}"', runs="coded")


ALGORITHM_CASES = [
    declaring("algorithm-term-unknown", "a term that does not exist",
              'id = "maximin"\nterms = { egalitarian = 0.5, efficiency = 0.5 }',
              "algorithms.0.terms.egalitarian", "terms = {", runs="maximin"),
    declaring("algorithm-weight-negative", "a negative weight",
              'id = "tilted"\nterms = { efficiency = 1.5, fairness = -0.5 }',
              "algorithms.0.terms.fairness", "terms = {"),
    declaring("algorithm-weights-sum", "weights that do not sum to 1",
              'id = "short"\nterms = { efficiency = 0.5, fairness = 0.4 }',
              "algorithms.0.terms", "terms = {"),
    declaring("algorithm-fair-equity-unbounded", "a fair_equity term without bounds",
              'id = "equity"\nterms = { efficiency = 0.7, fair_equity = 0.3 }',
              "algorithms.0.terms.fair_equity", "terms = {"),
    declaring("algorithm-bounds-unused", "bounds for an algorithm without fair_equity",
              'id = "plain"\nterms = { efficiency = 1 }\nfea_bounds = [0, 2]',
              "algorithms.0.fea_bounds", "fea_bounds = [0, 2]"),
    declaring("algorithm-id-preset", "a declared algorithm named like a preset",
              'id = "fair"\nterms = { fairness = 1 }', "algorithms.0.id",
              'id = "fair"\nterms'),
    declaring("algorithm-id-repeated", "two algorithms with one id",
              'id = "twice"\nterms = { fairness = 1 }\n\n[[algorithms]]\nid = "twice"\n'
              'terms = { efficiency = 1 }', "algorithms.1.id",
              'id = "twice"\nterms = { efficiency'),
    declaring("algorithm-no-reward", "an algorithm with neither terms nor code",
              'id = "empty"', "algorithms.0", "[[algorithms]]"),
    declaring("algorithm-terms-and-code", "both terms and code",
              'id = "both"\nterms = { fairness = 1 }\npython = "goal_rewards_example:noisy"',
              "algorithms.0.python", 'python = "'),
    declaring("algorithm-python-file", "a file name for the code's function",
              'id = "coded"\npython = "rewards.py"', "algorithms.0.python", 'python = "'),
    declaring("algorithm-memory-unknown", "memory over something other than the study",
              'id = "remembering"\nterms = { fairness = 1 }\nmemory = "session"',
              "algorithms.0.memory", 'memory = "'),
    Case("algorithm-undeclared", "a condition running an algorithm no table declares",
         'algorithm = "fair"', 'algorithm = "maximin"', "conditions.1.algorithm"),
    coded("algorithm-code-noisy", "code that returns other values on a second call",
          "goal_rewards_example:noisy"),
    coded("algorithm-code-above-one", "code that returns values above 1",
          "goal_rewards_example:above_one"),
    coded("algorithm-code-shape", "code that returns one value per team",
          "goal_rewards_example:one_per_team"),
    coded("algorithm-code-nan", "code that returns NaN for some goals",
          "goal_rewards_example:undefined_somewhere"),
    coded("algorithm-code-missing", "code in a module that does not exist",
          "no_such_lab.rewards:nash"),
]

CASES = [
    # --- misspelt keys, at every level ---
    Case("typo-table-study", "a misspelt top-level table", "[study]\n", "[studdy]\n", "studdy"),
    Case("typo-study-name", "a misspelt key in [study]", 'name = "demo"', 'nmae = "demo"',
         "study.nmae"),
    Case("typo-study-title", "a misspelt key in [study]", "title = \"The Fair Bakery (demo)\"",
         "titel = \"The Fair Bakery (demo)\"", "study.titel"),
    Case("typo-round-seconds", "a misspelt duration", "round_seconds = 8",
         "round_second = 8", "study.round_second"),
    Case("typo-practice-seconds", "British spelling of practice", "practice_seconds = ",
         "practise_seconds = ", "study.practise_seconds"),
    Case("typo-condition-order", "a misspelt key in [study]", 'condition_order = "alternate"',
         'condition_ordr = "alternate"', "study.condition_ordr"),
    Case("typo-min-cookie", "a misspelt key in [study]", "min_cookie_seconds = 0.5",
         "min_cookie_second = 0.5", "study.min_cookie_second"),
    Case("moved-open-enrolment", "open_enrolment left in [study] where it used to be",
         "[study]\n", "[study]\nopen_enrolment = true\n", "study.open_enrolment",
         "open_enrolment = true"),
    Case("typo-reference-speed", "a misspelt key in a cookie table",
         "reference_speed = ", "referencespeed = ", "cookies.squares.referencespeed"),
    Case("typo-cookie-table", "a misspelt cookie table", "[cookies.letters]",
         "[cookies.letter]", "cookies.letter"),
    Case("typo-theme-color", "American spelling of colour", 'colour = "#4b2e83"',
         'color = "#4b2e83"', "themes.0.color"),
    Case("typo-theme-description", "a misspelt key in the second theme",
         'description = "The Ravens\'', 'descripton = "The Ravens\'', "themes.1.descripton"),
    Case("typo-condition-algorithm", "a misspelt key in a condition",
         'algorithm = "efficient"', 'algoritm = "efficient"', "conditions.0.algoritm"),
    Case("typo-condition-robot", "a misspelt key in the second condition", 'robot = "Pat"',
         'robot_name = "Pat"', "conditions.1.robot_name"),
    Case("typo-transparency", "a misspelt key in a condition", "transparency = \"Robot Chris",
         "transparancy = \"Robot Chris", "conditions.0.transparancy"),
    Case("typo-page-title", "a misspelt key in a page", 'title = "Welcome to the bakery"',
         'titel = "Welcome to the bakery"', "pages.consent.titel"),
    Case("typo-page-name", "a misspelt page", "[pages.withdrawn]", "[pages.withdraw]",
         "pages.withdraw"),
    Case("typo-scale-anchors", "a misspelt key in a scale",
         'anchors = ["Strongly disagree"', 'anchor = ["Strongly disagree"',
         "scales.agreement.anchor"),
    Case("typo-scale-points", "a misspelt key in the second scale",
         'points = 7\nanchors = ["Dislike', 'point = 7\nanchors = ["Dislike',
         "scales.liking.point"),
    Case("typo-preferences-prompt", "a misspelt key in [preferences]", 'prompt = "How much',
         'promt = "How much', "preferences.promt"),
    Case("typo-items-table", "a misspelt array of tables",
         "[[questionnaires.session.items]]\nid = \"cap_agree\"",
         "[[questionnaires.session.item]]\nid = \"cap_agree\"", "questionnaires.session.item"),
    Case("typo-item-options", "a misspelt key in a choice item",
         'options = ["Robot {robot:efficient}", "Robot {robot:fair}", "No difference"]',
         'optoins = ["Robot {robot:efficient}", "Robot {robot:fair}", "No difference"]',
         "questionnaires.post.items.<post:better_consideration>.optoins"),
    Case("typo-questionnaire-title", "a misspelt key in a questionnaire",
         'title = "Last questions"', 'titel = "Last questions"', "questionnaires.post.titel"),
    Case("typo-recruitment-key", "an unknown recruitment key", "[recruitment]\n",
         "[recruitment]\ncompletion_link = \"https://example.org/done\"\n",
         "recruitment.completion_link", "completion_link"),
    Case("typo-open-enrollment", "American spelling of enrolment", "open_enrolment = true",
         "open_enrollment = true", "recruitment.open_enrollment"),
    Case("typo-analysis-exclude", "a misspelt key in [analysis]", "exclude = [",
         "exlude = [", "analysis.exlude"),
    Case("typo-pool-teams", "a misspelt key in [pool]", "teams = 20_000", "team = 20_000",
         "pool.team"),
    Case("typo-pool-sample", "an upper-case key in [pool.sample]", "c = [0.01, 0.99]",
         "C = [0.01, 0.99]", "pool.sample.C"),
    Case("typo-pool-gap", "a shortened key in [pool.teammate]", "fair_gap_above = 0.60",
         "fair_gap = 0.60", "pool.teammate.fair_gap"),
    Case("typo-pool-algorithms", "a singular key in [pool]", 'algorithms = ["efficient"',
         'algorithm = ["efficient"', "pool.algorithm"),
    Case("typo-pool-sample-table", "a misspelt pool table", "[pool.sample]", "[pool.sampel]",
         "pool.sampel"),
    # --- wrong types ---
    Case("type-kits-text", "kits written as text", "kits = [2, 2]                 #",
         'kits = "2, 2"                 #', "study.kits"),
    Case("type-seconds-text", "a duration in quotes", "round_seconds = 8",
         'round_seconds = "8"', "study.round_seconds"),
    Case("type-name-number", "a number for the name", 'name = "demo"', "name = 7",
         "study.name"),
    Case("type-robot-number", "a number for a robot's name", 'robot = "Chris"', "robot = 7",
         "conditions.0.robot"),
    Case("type-practice-text", "practice rounds as one text",
         'practice = ["squares", "squares", "letters", "letters"]', 'practice = "squares"',
         "study.practice"),
    Case("type-enrolment-text", "yes for true", "open_enrolment = true",
         'open_enrolment = "yes"', "recruitment.open_enrolment"),
    Case("type-theme-number", "a number for a theme reference", 'theme = "ravens"',
         "theme = 1", "cookies.squares.theme"),
    Case("type-page-list", "a list for a page text",
         'text = "Thank you for taking part. You may close this window now."',
         'text = ["Thank you for taking part."]', "pages.done.text"),
    Case("type-points-fraction", "a fraction of points", "points = 7\nanchors = [\"Strongly",
         "points = 7.5\nanchors = [\"Strongly", "scales.agreement.points"),
    Case("type-anchors-text", "anchors as one text",
         'anchors = ["Strongly disagree", "Neither agree nor disagree", "Strongly agree"]',
         'anchors = "Strongly disagree"', "scales.agreement.anchors"),
    Case("type-required-text", "yes for true", "required = true", 'required = "yes"',
         "questionnaires.session.items.<session:fair_overall_why>.required"),
    Case("type-min-text", "a number item's bound in quotes", "min = 16", 'min = "16"',
         "questionnaires.post.items.<post:age>.min"),
    Case("type-teams-float", "a pool size with a decimal point", "teams = 20_000",
         "teams = 20000.0", "pool.teams"),
    Case("type-seed-text", "a seed in quotes", "seed = 3", 'seed = "3"', "pool.seed"),
    Case("type-pool-kits-float", "pool kits with decimal points", "humans = 2\nkits = [2, 2]",
         "humans = 2\nkits = [2.0, 2.0]", "pool.kits.0", "kits = [2.0"),
    Case("type-exclude-text", "one rule as text", 'exclude = ["aborted", "recovered-capability"]',
         'exclude = "aborted"', "analysis.exclude"),
    Case("type-minutes-text", "minutes in quotes", "open_enrolment = true",
         'open_enrolment = true\nbinding_idle_minutes = "30"',
         "recruitment.binding_idle_minutes", "binding_idle_minutes"),
    Case("type-min-cookie-bool", "true for a duration", "min_cookie_seconds = 0.5",
         "min_cookie_seconds = true", "study.min_cookie_seconds"),
    Case("type-initials-number", "a number for initials", 'initials = "BR"', "initials = 12",
         "themes.0.initials"),
    # --- out of range, NaN and infinity ---
    Case("range-kits-huge", "100,000 kits a type", "kits = [2, 2]                 #",
         "kits = [100000, 100000]       #", "study.kits.0"),
    Case("range-kits-odd", "an odd number of kits for two humans",
         "kits = [2, 2]                 #", "kits = [2, 1]                 #", "study.kits"),
    Case("range-kits-negative", "negative kits", "kits = [2, 2]                 #",
         "kits = [-2, 4]                #", "study.kits.0"),
    Case("range-kits-three", "kits for three task types", "kits = [2, 2]                 #",
         "kits = [2, 2, 2]              #", "study.kits"),
    Case("nan-round-seconds", "NaN duration", "round_seconds = 8", "round_seconds = nan",
         "study.round_seconds"),
    Case("inf-round-seconds", "infinite duration", "round_seconds = 8", "round_seconds = inf",
         "study.round_seconds"),
    Case("range-practice-zero", "a practice round of no time", r"practice_seconds = [\d.]+",
         "practice_seconds = 0", "study.practice_seconds", pattern=True),
    Case("range-round-day", "a round of more than a day", "round_seconds = 8",
         "round_seconds = 100000", "study.round_seconds"),
    Case("nan-min-cookie", "NaN disables the too-fast check", "min_cookie_seconds = 0.5",
         "min_cookie_seconds = nan", "study.min_cookie_seconds"),
    Case("range-min-cookie-negative", "a negative too-fast limit", "min_cookie_seconds = 0.5",
         "min_cookie_seconds = -1", "study.min_cookie_seconds"),
    Case("range-speed-zero", "a reference speed of zero", r"reference_speed = [\d.]+",
         "reference_speed = 0", "cookies.squares.reference_speed", pattern=True),
    Case("inf-speed", "an infinite reference speed",
         r"reference_speed = [\d.]+", "reference_speed = inf",
         "cookies.letters.reference_speed", pattern=True, occurrence=1),
    Case("range-speed-huge", "a billion cookies a second",
         r"reference_speed = [\d.]+", "reference_speed = 1e9",
         "cookies.letters.reference_speed", pattern=True, occurrence=1),
    Case("range-speed-tiny", "a cookie in 1e300 seconds", r"reference_speed = [\d.]+",
         "reference_speed = 1e-300", "cookies.squares.reference_speed", pattern=True),
    Case("range-kits-solver", "kits whose solver tables need hundreds of GiB",
         "kits = [2, 2]                 #", "kits = [64, 64]               #", "study.kits"),
    Case("range-pool-ten-billion", "a pool of ten billion teams", "teams = 20_000",
         "teams = 10_000_000_000", "pool.teams"),
    Case("range-pool-1e10", "a pool of 1e10 teams", "teams = 20_000", "teams = 1e10",
         "pool.teams"),
    Case("range-pool-empty", "a pool of no teams", "teams = 20_000", "teams = 0",
         "pool.teams"),
    Case("range-seed-digits", "a seed of 5,000 digits", "seed = 3", "seed = " + "9" * 5000,
         "pool.seed"),
    Case("range-seed-huge", "a seed beyond 64 bits", "seed = 3", "seed = " + "9" * 40,
         "pool.seed"),
    Case("range-teams-400-digits", "a pool size beyond any float", "teams = 20_000",
         "teams = " + "9" * 400, "pool.teams"),
    Case("range-seed-negative", "a negative seed", "seed = 3", "seed = -1", "pool.seed"),
    Case("nan-fair-gap", "NaN fair gap", "fair_gap_above = 0.60", "fair_gap_above = nan",
         "pool.teammate.fair_gap_above"),
    Case("range-sample-above-one", "a capability range beyond 1", "c = [0.01, 0.99]",
         "c = [0.01, 1.5]", "pool.sample.c"),
    Case("nan-sample", "NaN in a preference range", "p = [0.01, 0.99]", "p = [nan, 0.99]",
         "pool.sample.p"),
    Case("range-points-hundred", "a 100-point scale", "points = 7\nanchors = [\"Strongly",
         "points = 100\nanchors = [\"Strongly", "scales.agreement.points"),
    Case("range-points-one", "a 1-point scale", "points = 7\nanchors = [\"Dislike",
         "points = 1\nanchors = [\"Dislike", "scales.liking.points"),
    Case("range-expiry-zero", "participants expiring at once", "open_enrolment = true",
         "open_enrolment = true\nunconsented_expiry_minutes = 0",
         "recruitment.unconsented_expiry_minutes", "unconsented_expiry_minutes"),
    Case("inf-binding", "a binding that never frees", "open_enrolment = true",
         "open_enrolment = true\nbinding_idle_minutes = inf",
         "recruitment.binding_idle_minutes", "binding_idle_minutes"),
    Case("inf-item-max", "an infinite upper bound", "max = 110", "max = inf",
         "questionnaires.post.items.<post:age>.max"),
    Case("range-item-min-max", "min above max", "min = 16\nmax = 110", "min = 110\nmax = 16",
         "questionnaires.post.items.<post:age>.max", "max = 16"),
    Case("range-text-length", "a text answer of no length", 'text = "Why? (optional)"',
         'text = "Why? (optional)"\nmax_length = 0',
         "questionnaires.post.items.<post:next_time_why>.max_length", "max_length = 0"),
    Case("fea-bounds-word", "a misspelt \"pool\" for FEA's bounds", 'algorithm = "fair"',
         'algorithm = "fea"\nfea_bounds = "poool"', "conditions.1.fea_bounds", "fea_bounds"),
    Case("fea-bounds-reversed", "FEA bounds with lo above hi", 'algorithm = "fair"',
         'algorithm = "fea"\nfea_bounds = [2, 1]', "conditions.1.fea_bounds", "fea_bounds"),
    Case("fea-bounds-without-pool-fea", "FEA taking bounds from a pool that has none",
         'algorithm = "fair"', 'algorithm = "fea"', "conditions.1.fea_bounds",
         '[[conditions]]\nid = "fair"'),
    Case("w-without-fea", "a weight for a robot that does not use one",
         'robot = "Chris"', 'robot = "Chris"\nw = 0.5', "conditions.0.w", "w = 0.5"),
    # --- unsafe or oversized names and texts ---
    Case("name-path", "a name that climbs out of var/", 'name = "demo"',
         'name = "../../evil"', "study.name"),
    Case("name-5000", "a 5,000-character name", 'name = "demo"',
         'name = "' + "a" * 5000 + '"', "study.name"),
    Case("name-spaces", "a name with spaces and capitals", 'name = "demo"',
         'name = "Demo Study"', "study.name"),
    Case("name-empty", "an empty name", 'name = "demo"', 'name = ""', "study.name"),
    Case("title-5000", "a 5,000-character title", 'title = "The Fair Bakery (demo)"',
         'title = "' + "The Fair Bakery " * 320 + '"', "study.title"),
    Case("theme-id-unsafe", "a theme id with capitals and punctuation", 'id = "ravens"',
         'id = "Ravens!"', "themes.0.id"),
    Case("condition-id-path", "a condition id with a path", 'id = "efficient"',
         'id = "../x"', "conditions.0.id"),
    Case("robot-markup", "markup in a robot's name", 'robot = "Chris"',
         'robot = "<script>alert(1)</script>"', "conditions.0.robot"),
    Case("item-id-capital", "an item id with a capital", 'id = "age"', 'id = "Age"',
         "questionnaires.post.items.<post:age>.id"),
    Case("id-parameter-space", "a query parameter with a space", "open_enrolment = true",
         'open_enrolment = true\nid_parameter = "PROLIFIC PID"', "recruitment.id_parameter",
         "id_parameter"),
    Case("url-javascript", "a script address for completion", "open_enrolment = true",
         'open_enrolment = true\ncompletion_url = "javascript:alert(1)"',
         "recruitment.completion_url", "completion_url"),
    Case("url-ftp", "an ftp address to return to", "open_enrolment = true",
         'open_enrolment = true\nreturn_url = "ftp://example.org/back"',
         "recruitment.return_url", "return_url"),
    Case("colour-word", "a colour name instead of #rrggbb", 'colour = "#4b2e83"',
         'colour = "purple"', "themes.0.colour"),
    Case("theme-text-punctuation", "a theme text without letters", 'text = "GO RAVENS"',
         'text = "!!!"', "themes.0.text"),
    Case("text-bidi-override", "a right-to-left override pasted into a question",
         'text = "Your age in years"', 'text = "Your age in \u202eyears"',
         "questionnaires.post.items.<post:age>.text"),
    Case("text-nul-escape", "a NUL written as an escape", 'text = "Your age in years"',
         'text = "Your age\\u0000 in years"', "questionnaires.post.items.<post:age>.text"),
    Case("text-terminal-escape", "a terminal escape sequence in a page title",
         'title = "Welcome to the bakery"', 'title = "Welcome to the bakery\\u001b[2J"',
         "pages.consent.title"),
    Case("type-team-types-text", "one team type as text", "[pool.teammate]\n",
         '[pool.teammate]\nteam_types = "mixed"\n', "pool.teammate.team_types", "team_types"),
    Case("date-impossible", "a calibration day that is not in the calendar", "\n[pool]\n",
         '\n[calibration]\npilot = "pilot.sqlite"\npilot_sha256 = "' + "0" * 64 + '"\n'
         'participants = 12\nfirst = "2026-13-45"\nlast = "2026-03-20"\n'
         'rule = "median speed"\nchanges = []\n\n[pool]\n', "calibration.first",
         'first = "2026-13-45"'),
    Case("date-reversed", "a calibration's last day before its first", "\n[pool]\n",
         '\n[calibration]\npilot = "pilot.sqlite"\npilot_sha256 = "' + "0" * 64 + '"\n'
         'participants = 12\nfirst = "2026-03-20"\nlast = "2026-03-02"\n'
         'rule = "median speed"\nchanges = []\n\n[pool]\n', "calibration.last",
         'last = "2026-03-02"'),
    # --- parts that must agree ---
    Case("robots-same-name", "both robots called Chris", 'robot = "Pat"', 'robot = "Chris"',
         "conditions.1.robot"),
    Case("robots-same-name-case", "robots differing only in case", 'robot = "Pat"',
         'robot = "chris"', "conditions.1.robot"),
    Case("conditions-same-id", "two conditions with one id", 'id = "fair"', 'id = "efficient"',
         "conditions.1.id"),
    Case("pool-kits-differ", "pool kits different from the study's",
         "humans = 2\nkits = [2, 2]", "humans = 2\nkits = [8, 8]", "pool.kits", "kits = [8, 8]"),
    Case("pool-kits-default", "pool kits left out (the default differs from the study's)",
         "humans = 2\nkits = [2, 2]\n", "humans = 2\n", "pool.kits", "[pool]\n#"),
    Case("theme-unknown", "a cookie decorated with an unknown theme", 'theme = "ravens"',
         'theme = "eagles"', "cookies.squares.theme"),
    Case("theme-shared", "both cookie types decorated with one theme",
         'theme = "steelers"', 'theme = "ravens"', "cookies.letters.theme"),
    Case("option-repeated", "a choice offering one answer twice",
         'options = ["Woman", "Man", "Non-binary"', 'options = ["Woman", "Woman", "Non-binary"',
         "questionnaires.post.items.<post:gender>.options"),
    Case("scale-unknown", "preferences on an unknown scale", 'scale = "liking"',
         'scale = "likeness"', "preferences.scale"),
    Case("item-scale-unknown", "a likert item on an unknown scale", 'scale = "agreement"',
         'scale = "agree"', "questionnaires.session.items.<session:cap_agree>.scale"),
    Case("item-id-repeated", "two items with one id", 'id = "cap_rating"', 'id = "cap_agree"',
         "questionnaires.session.items.<session:cap_rating>.id"),
    Case("theme-id-repeated", "two themes with one id", '[[themes]]\nid = "steelers"',
         '[[themes]]\nid = "ravens"\nname = "Again"\ntext = "GO"\ninitials = "A"\n'
         'description = "A copy."\n\n[[themes]]\nid = "steelers"', "themes.1.id",
         'id = "ravens"\nname = "Again"'),
    Case("robot-reference-unknown", "a text naming a robot that does not exist",
         "You worked with two robots: Robot {robot:efficient} and Robot {robot:fair}.",
         "You worked with two robots: Robot {robot:efficient} and Robot {robot:fea}.",
         "questionnaires.post.text"),
    Case("practice-one-letters", "only one letters practice round",
         'practice = ["squares", "squares", "letters", "letters"]',
         'practice = ["squares", "squares", "letters"]', "study.practice"),
    Case("manipulation-item-unknown", "a manipulation check naming no item",
         'manipulation_check_item = "teammate_understood"',
         'manipulation_check_item = "understood"',
         "analysis.manipulation_check_item"),
    Case("manipulation-pass-unknown", "a passing answer that is not an option",
         'manipulation_check_pass = ["A computer agent"]',
         'manipulation_check_pass = ["Yes"]', "analysis.manipulation_check_pass.0"),
    Case("manipulation-rule-without-item", "a manipulation-check exclusion without the item",
         "\n".join(['exclude = ["aborted", "recovered-capability"]',
                    "keep_completed_sessions_of_incomplete = true",
                    'manipulation_check_item = "teammate_understood"  # did the participant '
                    "take in that the teammate was an agent",
                    'manipulation_check_pass = ["A computer agent"]']),
         'exclude = ["failed-manipulation-check"]\nkeep_completed_sessions_of_incomplete = true',
         "analysis.exclude"),
    Case("exclude-unknown-rule", "an unknown exclusion rule",
         'exclude = ["aborted", "recovered-capability"]', 'exclude = ["dropouts"]',
         "analysis.exclude.0"),
    Case("exclude-repeated", "a rule named twice",
         'exclude = ["aborted", "recovered-capability"]', 'exclude = ["aborted", "aborted"]',
         "analysis.exclude"),
    Case("algorithm-unknown", "an unknown algorithm", 'algorithm = "efficient"',
         'algorithm = "fastest"', "conditions.0.algorithm"),
    Case("item-kind-unknown", "an unknown item kind", 'kind = "likert"', 'kind = "slider"',
         "questionnaires.session.items.<session:cap_agree>.kind"),
    Case("item-kind-missing", "an item without a kind", 'label = "Age"\nkind = "number"\n',
         'label = "Age"\n', "questionnaires.post.items.<post:age>.kind",
         '[[questionnaires.post.items]]\nid = "age"'),
    Case("pool-humans-three", "a pool of three-human teams", "humans = 2", "humans = 3",
         "pool.humans"),
    Case("pool-algorithm-unknown", "an unknown pool algorithm",
         'algorithms = ["efficient", "fair"]', 'algorithms = ["efficient", "fair", "greedy"]',
         "pool.algorithms.2"),
    Case("pool-reading-unknown", "an unknown reading of the most capable human",
         'algorithms = ["efficient", "fair"]',
         'algorithms = ["efficient", "fair"]\nmost_capable_reading = "highest"',
         "pool.most_capable_reading", "most_capable_reading"),
    Case("pool-role-unknown", "an unknown teammate role", 'role = "any"', 'role = "leader"',
         "pool.teammate.role"),
    Case("pool-team-type-unknown", "an unknown team type", "[pool.teammate]\n",
         '[pool.teammate]\nteam_types = ["mixed", "chaotic"]\n', "pool.teammate.team_types.1",
         "team_types"),
    Case("pool-sample-shape", "one range for two task types", "c = [0.01, 0.99]",
         "c = [[0.01, 0.99]]", "pool.sample.c"),
    Case("pool-fea-unused", "FEA settings without fea among the algorithms",
         "[pool.teammate]\n", '[pool.fea]\nw = 0.7\nbounds = [0.0, 2.0]\nbounds_source = "a '
         'guess"\n\n[pool.teammate]\n', "pool.fea", "[pool.fea]"),
    Case("pool-gap-without-fair", "a fair gap criterion without the fair algorithm",
         'algorithms = ["efficient", "fair"]', 'algorithms = ["efficient"]',
         "pool.teammate.fair_gap_above", "fair_gap_above"),
    # --- missing parts ---
    Case("missing-kits", "no kits", "kits = [2, 2]                 # squares, letters kits: 2 "
         "short rounds a session\n", "", "study.kits", "[study]"),
    Case("missing-page-text", "a page without its text",
         '\ntext = "You chose not to take part. Nothing about you has been stored except that '
         'choice. You may close this window."', "", "pages.declined.text", "[pages.declined]"),
]

CUTS = [
    ("missing-study", "no [study] section", cut("[study]", "# Which theme"), "study", None),
    ("missing-pool", "no [pool] section", cut("\n[pool]\n", None), "pool", None),
    ("missing-post", "no post-study questionnaire",
     cut("[questionnaires.post]", "# How participants"), "questionnaires.post",
     "[questionnaires.session]"),
    ("missing-preferences", "no [preferences]", cut("[preferences]", "[questionnaires.session]"),
     "preferences", None),
    ("missing-cookies", "no cookie tables", cut("[cookies.squares]", "[[themes]]"), "cookies",
     None),
    ("missing-conditions", "no conditions", cut("[[conditions]]", "[pages.consent]"),
     "conditions", None),
    ("conditions-one", "a single condition", cut('[[conditions]]\nid = "fair"', "[pages."),
     "conditions", '[[conditions]]\nid = "efficient"'),
    ("missing-page", "a page left out", cut("[pages.unmatched]", "[scales."), "pages.unmatched",
     "[pages.consent]"),
]


def syntax_cases() -> list[Case]:
    return [
        Case("syntax-unclosed-string", "an unclosed string", 'title = "The Fair Bakery (demo)"',
             'title = "The Fair Bakery (demo)', "study.title"),
        Case("syntax-missing-equals", "a key without =", "round_seconds = 8", "round_seconds 8",
             "study.round_seconds"),
        Case("syntax-duplicate-key", "a key written twice", "round_seconds = 8",
             "round_seconds = 8\nround_seconds = 9", "study.round_seconds", "round_seconds = 9"),
        Case("syntax-unclosed-header", "an unclosed table header", "[pages.done]",
             "[pages.done", "pages.done"),
        Case("syntax-unclosed-array", "an unclosed array", "kits = [2, 2]                 #",
             "kits = [2, 2                  #", "study.kits"),
        Case("syntax-bare-word", "a text without quotes", 'condition_order = "alternate"',
             "condition_order = alternate", "study.condition_order"),
        Case("syntax-duplicate-table", "a table written twice", "[pages.declined]",
             '[pages.done]\ntitle = "Again"\n\n[pages.declined]', "pages.done",
             '[pages.done]\ntitle = "Again"'),
        Case("syntax-bad-escape", "an invalid escape in a string",
             'text = "Why? (optional)"', 'text = "Why\\q (optional)"',
             "questionnaires.post.items.<post:next_time_why>.text"),
        Case("syntax-nul-byte", "a NUL character in a text", 'text = "Your age in years"',
             'text = "Your age\x00 in years"', "questionnaires.post.items.<post:age>.text"),
        Case("deep-array", "an array nested 500 deep", "kits = [2, 2]                 #",
             "kits = " + "[" * 500 + "2" + "]" * 500 + " #", "study.kits"),
        Case("deep-inline-table", "inline tables nested 500 deep", "c = [0.01, 0.99]",
             "c = " + "{a = " * 500 + "1" + "}" * 500, "pool.sample.c"),
        Case("deep-array-multiline", "a deep array spread over lines",
             "p = [0.01, 0.99]", "p = " + "[\n" * 40 + "0.5" + "\n]" * 40, "pool.sample.p"),
    ]


def item_positions(field: str, demo: str) -> str:
    """``<post:age>`` in an expected field becomes the position of item ``age`` of the
    post-study questionnaire (items are added to the demo over time)."""
    questionnaires = tomllib.loads(demo)["questionnaires"]

    def position(match: re.Match[str]) -> str:
        items = questionnaires[match.group(1)]["items"]
        return str(next(i for i, item in enumerate(items) if item["id"] == match.group(2)))
    return re.sub(r"<(session|post):([a-z_]+)>", position, field)


def find(text: str, case: Case) -> tuple[int, int]:
    """Where the case's ``old`` text is in ``text``, as a slice."""
    pattern = case.old if case.pattern else re.escape(case.old)
    matches = list(re.finditer(pattern, text))
    if len(matches) <= case.occurrence:
        raise ValueError(f"{case.name}: {case.old!r} not found in the demo protocol")
    return matches[case.occurrence].span()


def write(name: str, what: str, body: bytes, field: str, line: int) -> None:
    header = f"# malformed: {what}\n# expect: {field} @ {line}\n".encode()
    (CORPUS / f"{name}.toml").write_bytes(header + body)


def line_of(text: str, anchor: str, start: int) -> int:
    position = text.find(anchor, start)
    if position < 0:
        position = text.index(anchor)
    return text.count("\n", 0, position) + 1 + HEADER_LINES


# The demo's timings change as it is tuned; the corpus starts from fixed ones so that
# every case finds the text it changes.
CANONICAL = {
    r"(?m)^kits = .*$": "kits = [2, 2]                 # squares, letters kits: 2 short rounds "
                        "a session",
    r"(?m)^round_seconds = .*$": "round_seconds = 8",
    r"(?m)^practice_seconds = .*$": "practice_seconds = 6",
    r"(?m)^min_cookie_seconds = .*$": "min_cookie_seconds = 0.5",
}


def canonical(demo: str) -> str:
    for pattern, line in CANONICAL.items():
        demo = re.sub(pattern, line, demo, count=1)
    return demo


def main() -> None:
    demo = canonical(DEMO.read_text(encoding="utf-8"))
    CORPUS.mkdir(exist_ok=True)
    for old in CORPUS.glob("*.toml"):
        old.unlink()
    for case in [*CASES, *ALGORITHM_CASES, *syntax_cases()]:
        start, end = find(demo, case)
        text = demo[:start] + case.new + demo[end:]
        if case.anchor is None:
            line = line_of(text, case.new.split("\n")[0], start)
        else:
            line = line_of(text, case.anchor, 0)
        write(case.name, case.what, text.encode(), item_positions(case.field, demo), line)
    for name, what, remove, field, anchor in CUTS:
        text, _ = remove(demo)
        line = 1 if anchor is None else line_of(text, anchor, 0)
        write(name, what, text.encode(), field, line)
    write_byte_cases(demo)


def write_byte_cases(demo: str) -> None:
    consent = demo.index("You are invited")
    latin1 = demo[:consent] + "Caf\u00e9 " + demo[consent:]
    body = latin1.encode("latin-1", errors="replace")
    write("bytes-latin1-page", "a page saved as Latin-1", body, "pages.consent.text",
          latin1.count("\n", 0, consent) + 1 + HEADER_LINES)
    name = demo.index('name = "demo"')
    body = demo[:name].encode() + b'name = "d\xe9mo"' + demo[name + len('name = "demo"'):].encode()
    write("bytes-latin1-name", "a Latin-1 byte in the name", body, "study.name",
          demo.count("\n", 0, name) + 1 + HEADER_LINES)
    write("bytes-binary", "a binary file instead of a protocol", b"\x89PNG\r\n\x1a\n\x00\xff",
          "file", 1 + HEADER_LINES)
    write("empty", "an empty file", b"", "study", 1)
    json_body = b'{"study": {"name": "demo"}}\n'
    write("json-instead", "a JSON document instead of TOML", json_body, "syntax",
          1 + HEADER_LINES)
    write("only-comment", "only a comment", b"# to do\n", "study", 1)


if __name__ == "__main__":
    main()
