"""Batch directives a cluster spec may add (``job_extra_directives``): an allow-list per
batch system, read the way that batch system reads a directive line.

``sbatch`` (SLURM) and ``qsub`` (PBS, Torque) parse their directives with getopt: a
group of single letters is read letter by letter (``-Qo/x`` is ``-Q -o /x``), and the
letter that takes a value swallows the rest of the group or the next word.  SLURM's
long options (``--partition=gpu``) are accepted only when written in full, so that no
abbreviation getopt_long would expand (``--outp`` for ``--output``) slips through.
SGE's ``qsub`` and LSF's ``bsub`` take whole-word options (``-pe``, ``-We``): a word
must be one of the allowed options exactly, so an attached value (``-Etouch``) or a
bundle (``-xo``) is refused.  Everything outside the allow-lists below is refused,
above all whatever sets the job's environment, shell, working directory, files or
pre/post commands: those are distsketch's to choose.  ``docs/security.md`` lists the
allowed directives.
"""

from __future__ import annotations

import re
import shlex

__all__ = ["DIRECTIVE_PREFIX", "LONG_OPTIONS", "SHORT_OPTIONS", "WORD_OPTIONS",
           "directive_problem"]

#: the prefix dask-jobqueue writes before each directive of a batch kind
DIRECTIVE_PREFIX = {"slurm": "#SBATCH", "pbs": "#PBS", "sge": "#$", "lsf": "#BSUB"}

# how an option takes its value: a required value (attached or the next word), none, or
# an optional value that only counts when attached with "="
VALUE, SWITCH, OPTIONAL = "value", "switch", "optional"

#: getopt letters of sbatch and qsub (PBS) a spec may use, with how each takes a value.
#: A letter is marked VALUE only where the batch system's own option string says so:
#: were a switch marked VALUE, the rest of its group would be read here as a value and
#: there as options.
SHORT_OPTIONS: dict[str, dict[str, str]] = {
    # no -Q (--quiet) in sbatch, no -z in qsub: both keep the job id from being printed, so
    # dask-jobqueue could neither track nor cancel the job it submitted
    "slurm": {**dict.fromkeys("AbBcCdGJLmMnNpqStwx", VALUE), **dict.fromkeys("HkOsv", SWITCH)},
    # PBS Pro and Torque: -l resources (no prologue/epilogue), -W only depend= / group_list=
    "pbs": {**dict.fromkeys("AacjklmMNpPqrW", VALUE), **dict.fromkeys("hn", SWITCH)},
}

#: SLURM long options a spec may use, written in full (``--name=value`` or ``--name value``)
LONG_OPTIONS: dict[str, dict[str, str]] = {"slurm": {
    **dict.fromkeys([
        "account", "acctg-freq", "batch", "begin", "cluster", "cluster-constraint", "clusters",
        "comment", "constraint", "core-spec", "cores-per-socket", "cpu-freq", "cpus-per-gpu",
        "cpus-per-task", "deadline", "delay-boot", "dependency", "distribution", "exclude",
        "extra-node-info", "gpu-bind", "gpu-freq", "gpus", "gpus-per-node", "gpus-per-socket",
        "gpus-per-task", "gres", "gres-flags", "hint", "job-name", "kill-on-invalid-dep",
        "licenses", "mail-type", "mail-user", "mcs-label", "mem", "mem-bind", "mem-per-cpu",
        "mem-per-gpu", "mincpus", "network", "nodelist", "nodes", "ntasks", "ntasks-per-core",
        "ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "open-mode", "partition", "power",
        "priority", "profile", "qos", "reservation", "signal", "sockets-per-node", "switches",
        "thread-spec", "threads-per-core", "time", "time-min", "tmp", "tres-per-task",
        "wait-all-nodes", "wckey",
    ], VALUE),
    **dict.fromkeys(["contiguous", "hold", "no-requeue", "overcommit", "oversubscribe",
                     "requeue", "spread-job", "use-min-nodes", "verbose"], SWITCH),
    **dict.fromkeys(["exclusive", "nice", "no-kill"], OPTIONAL),
}}

#: whole-word options of SGE's qsub and LSF's bsub a spec may use -> number of values
#: ("binding" for SGE's ``-binding [set|env|pe] strategy``)
WORD_OPTIONS: dict[str, dict[str, int | str]] = {
    "sge": {**dict.fromkeys(["-l", "-q", "-P", "-N", "-A", "-m", "-M", "-p", "-r", "-j", "-R",
                             "-hold_jid", "-hold_jid_ad", "-a", "-ar", "-dl", "-js", "-masterq",
                             "-now", "-ckpt", "-c", "-tc", "-w"], 1),
            **dict.fromkeys(["-h", "-notify", "-soft", "-hard"], 0), "-pe": 2,
            "-binding": "binding"},
    "lsf": {**dict.fromkeys(["-n", "-R", "-q", "-W", "-We", "-M", "-P", "-J", "-Jd", "-G", "-g",
                             "-app", "-sla", "-u", "-b", "-t", "-w", "-m", "-sp", "-c", "-gpu",
                             "-U", "-S", "-C", "-D", "-F", "-v", "-T", "-p", "-s",
                             "-alloc_flags", "-nnodes"], 1),
            **dict.fromkeys(["-x", "-B", "-N", "-Ne", "-H", "-r", "-rn", "-ul", "-hl"], 0)},
}

_PROGRAM = {"slurm": "sbatch", "pbs": "qsub", "sge": "qsub", "lsf": "bsub"}
# characters the batch systems' directive readers treat differently from one another
# (escapes, comments, SGE's $HOME-style path variables) or that end a line, and shell
# expansions, which no reader should see: refused rather than guessed at
_UNREAD = re.compile(r"[\\#$`\x00-\x1f\x7f\x85\u2028\u2029]")
_NEGATIVE = re.compile(r"-\d+", re.ASCII)  # a value such as a priority of -100
# PBS resources that name a script to run (Torque's -l prologue=..., file staging), also
# under a suffixed name (epilogue.precancel=, prologue.parallel=)
RESOURCE_CODE = re.compile(r"(prologue|epilogue|stagein|stageout|sandbox)[\w.]*\s*=",
                           re.IGNORECASE)
# options whose value sbatch reads as a file of host names when it holds a "/"
_SLURM_HOST_FILES = {"-w", "-x", "--nodelist", "--exclude"}
# SGE's -w: e(rror), w(arning), n(one); v(erify) and p(oke) submit nothing, so
# dask-jobqueue would find no job id
_SGE_VERIFY = {"e", "w", "n"}
_PBS_ATTRIBUTE = re.compile(r"(depend|group_list)=[^=]*", re.ASCII)


def _value_problem(kind: str, option: str, value: str) -> str | None:
    """What is wrong with the value of an allowed option (None when it is fine)."""
    if kind == "pbs" and option == "-l" and RESOURCE_CODE.search(value):
        return f"-l {value} names a script to run (prologue, epilogue, file staging)"
    if kind == "pbs" and option == "-W" and not _PBS_ATTRIBUTE.fullmatch(value):
        return f"-W {value}: only -W depend=... and -W group_list=... may be added"
    if kind == "slurm" and option in _SLURM_HOST_FILES and "/" in value:
        return (f"{option} {value}: sbatch reads a value with '/' as a file of host names on "
                "the submitting machine; give the host names")
    if kind == "lsf" and option == "-J" and "[" in value:
        return (f"-J {value}: a job name with '[' makes a job array, one job per index; "
                "give a plain name")
    if kind == "sge" and option == "-w" and value not in _SGE_VERIFY:
        return (f"-w {value}: only -w e, -w w or -w n may be added (v and p check the job "
                "and submit nothing)")
    return None


def _read_value(kind: str, words: list[str], i: int, option: str, value: str | None,
                lone: bool) -> tuple[int, str | None]:
    """Check the value of ``option`` at ``words[i]``: ``value`` when attached to it, else (None)
    the next word.  Returns the index of the last word read and the problem, if any.

    ``lone``: ``words`` is one word read on its own, so a missing value is no problem and
    values are not judged.
    """
    if value is None:
        if i + 1 >= len(words):
            return i + 1, (None if lone else f"{option} needs a value")
        value = words[i + 1]
        if value.startswith("-") and not _NEGATIVE.fullmatch(value):
            return i + 1, f"the value of {option} may not start with '-' ({value!r})"
        i += 1
    return i, (None if lone else _value_problem(kind, option, value))


def _getopt_problem(kind: str, words: list[str], lone: bool = False) -> str | None:
    """Read ``words`` as sbatch / qsub (PBS) read them; the first refused item, if any."""
    short, long = SHORT_OPTIONS[kind], LONG_OPTIONS.get(kind, {})
    program = _PROGRAM[kind]
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word == "-":
            return f"{word!r} is not an option (a directive holds options and their values)"
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            if name not in long:
                near = [n for n in long if n.startswith(name)] if name else []
                hint = (f"; write options in full (--{near[0]}), as {program} would expand an "
                        "abbreviation" if near else "")
                return f"--{name} is not among the {kind} directives a spec may add{hint}"
            how = long[name]
            if how == SWITCH and eq:
                return f"--{name} takes no value"
            taken = None if how == VALUE and not eq else value
            i, problem = _read_value(kind, words, i, f"--{name}", taken, lone)
            if problem:
                return problem
            i += 1
            continue
        letters = word[1:]
        for j, c in enumerate(letters):
            if c not in short:
                group = f" ({program} reads {word!r} letter by letter)" if len(letters) > 1 else ""
                return f"-{c}{group} is not among the {kind} directives a spec may add"
            if short[c] == VALUE:
                i, problem = _read_value(kind, words, i, f"-{c}", letters[j + 1:] or None, lone)
                if problem:
                    return problem
                break
        i += 1
    return None


def _word_problem(kind: str, words: list[str], lone: bool = False) -> str | None:
    """Read ``words`` as SGE's qsub / LSF's bsub read them (whole-word options)."""
    options = WORD_OPTIONS[kind]
    i = 0
    while i < len(words):
        word = words[i]
        if word not in options:
            if not word.startswith("-"):
                return f"{word!r} is not an option (a directive holds options and their values)"
            return (f"{word} is not among the {kind} directives a spec may add ({_PROGRAM[kind]} "
                    "options are whole words, each value a word of its own)")
        n = options[word]
        if n == "binding":  # -binding [set|env|pe] strategy
            n = 2 if i + 1 < len(words) and words[i + 1] in ("set", "env", "pe") else 1
        for _ in range(int(n)):
            i, problem = _read_value(kind, words, i, word, None, lone)
            if problem:
                return problem
        i += 1
    return None


def directive_problem(kind: str, directive: str) -> str | None:
    """What makes ``directive`` (one ``job_extra_directives`` item) unacceptable, or None.

    Parameters
    ----------
    kind : {"slurm", "pbs", "sge", "lsf"}
        The batch system.
    directive : str
        The text written after the directive prefix (``#SBATCH``, ``#PBS``, ``#$``,
        ``#BSUB``).

    Returns
    -------
    str or None
        None when every option of the line is in the kind's allow-list with a plain
        value; otherwise a sentence naming the first refused item.

    Notes
    -----
    The line is split into words with quotes respected, as the batch systems do.
    As their readers differ on quotes, a word that starts with ``-`` after splitting
    at every space (quotes ignored) must also be an allowed option, so that no
    quoting trick hides an option from this check that a batch system would see.
    Backslashes, ``#``, ``$``, backticks and control characters are refused.
    """
    bad = _UNREAD.search(directive)
    if bad:
        return (f"it holds {bad.group()!r}; a directive is one line of options and values "
                "without backslashes, '#', '$' or backticks")
    try:
        words = shlex.split(directive)
    except ValueError:
        return "its quotes are not balanced"
    if not words:
        return "it is empty"
    read = _word_problem if kind in WORD_OPTIONS else _getopt_problem
    problem = read(kind, words)
    if problem:
        return problem
    for piece in directive.split():
        piece = piece.replace('"', "").replace("'", "")
        if piece.startswith("-") and not _NEGATIVE.fullmatch(piece):
            problem = read(kind, [piece], lone=True)
            if problem:
                return f"{problem} (as read without its quotes)"
    return None
