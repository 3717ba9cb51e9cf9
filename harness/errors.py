"""Every error class of the harness, with its exit code and one-line hint.

    HarnessError                  exit 3   the run cannot go on
    ├── EndpointError             exit 3   the endpoint is unreachable or answers nonsense at start
    ├── SimulatorError            exit 3   the bundled simulator did not start
    ├── FigureError               exit 4   a figure of the summary is not finite: it is not written
    └── UsageError                exit 2   bad input, named by file, field or flag
        ├── ScenarioError                  a scenario file or one of its fields
        ├── TraceError                     a trace file and the line that cannot be read
        ├── TokenizerError                 a tokenizer path that cannot be loaded
        └── PresetError                    a presets file or one of its entries
    BadChunk                      (never leaves a backend) a stream payload that is not an OpenAI chunk:
                                  the request's record gets status `bad_stream`

Request failures are never exceptions: they are records with a status (harness.records). The CLI is
the one place that turns a `HarnessError` into its exit code (harness.cli.errors).
"""

from __future__ import annotations

EXIT_USAGE = 2
EXIT_HARNESS = 3
EXIT_NOTHING_OK = 4  # the run went through, but not one request succeeded
EXIT_NO_VERDICT = 5  # `harness compare` could not judge: the client limited a run, or no metric had a verdict
EXIT_REGRESSION = 99  # a threshold broken, or `harness compare` found a regression
EXIT_STOPPED = 130  # Ctrl-C or SIGTERM, as shells report a SIGINT
EXIT_HANGUP = 129  # SIGHUP (the terminal went away), as shells report it; the run ended as on SIGTERM


class HarnessError(RuntimeError):
    """A one-line reason the run could not go on; `hint` says what to do about it."""

    exit_code = EXIT_HARNESS
    hint = "the run could not go on"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:  # what to do about this one, where the kind's own hint would mislead
            self.hint = hint


class UsageError(HarnessError, ValueError):
    """Bad input; the message names the file, field or flag."""

    exit_code = EXIT_USAGE
    hint = "fix the input named in the message"


# The kinds the tree above names; each says where to look.
class EndpointError(HarnessError):
    hint = "check the URL, the model name, the API key and any header a gateway wants (--header)"


class SimulatorError(HarnessError):
    hint = "see the simulator's error output above"


class FigureError(HarnessError):
    """A summary figure that is NaN or infinite: exit 0 never comes with a figure that is not a number."""

    exit_code = EXIT_NOTHING_OK
    hint = "the records are in requests.jsonl; the row named is where the figure came from"


class ScenarioError(UsageError):
    hint = "see docs/scenarios.md for every field"


class TraceError(UsageError):
    hint = "--skip-bad-rows skips and counts unreadable rows"


class TokenizerError(UsageError):
    hint = "give a local tokenizer.json or a directory holding one"


class PresetError(UsageError):
    hint = "`harness sim presets` lists the known ones"


class BadChunk(ValueError):
    """A payload that is not a JSON object of the OpenAI stream shape."""
