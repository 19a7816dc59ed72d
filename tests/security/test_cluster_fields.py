"""Every cluster-spec field: listed in docs/security.md, and a hostile value of it refused.

For each field of each kind a hostile value (shell syntax, a code loader, a value of
the wrong shape) is a ``ConfigError`` naming the field, raised by ``validate_spec``,
before any cluster object exists.  The table in docs/security.md must list exactly
the fields the validator knows.  The allow-lists (worker arguments, ``extra``,
environment names, batch directives) are tested both ways.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from distsketch.cluster import BATCH_KINDS, KINDS, render_job_script, resolve_spec, validate_spec
from distsketch.errors import ConfigError

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
BATCH = {"cores": 1, "memory": "1GB"}
BASE = {"local": {}, "sync": {}, "threads": {}, "scheduler": {"address": "tcp://127.0.0.1:8786"},
        "ssh": {"hosts": ["node0", "node1"]}, "kubernetes": {"image": "ghcr.io/o/ds:1"}, "cuda": {},
        **dict.fromkeys(BATCH_KINDS, BATCH)}

# (kinds, field) -> a hostile value; "batch" is every batch kind, "all" every kind
HOSTILE = {
    ("all", "storage_options"): {"client_kwargs": {"endpoint_url": ["x"]}},
    ("local", "n_workers"): "2; touch PWNED", ("local", "threads_per_worker"): -1,
    ("local", "memory_limit"): "4GB; touch PWNED", ("local", "processes"): "yes",
    ("local", "dashboard_address"): ":8787 $(touch PWNED)",
    ("scheduler", "address"): "tcp://h:1;touch PWNED",
    ("scheduler", "scheduler_file"): "s.json\ntouch PWNED",
    ("scheduler ssh kubernetes batch cuda", "timeout"): "$(touch PWNED)",
    ("cuda", "n_workers"): "2; touch PWNED", ("cuda", "threads_per_worker"): -1,
    ("cuda", "memory_limit"): "4GB; touch PWNED", ("cuda", "device_memory_limit"): "40GB;id",
    ("cuda", "rmm_pool_size"): "$(id)", ("cuda", "cuda_visible_devices"): "0;id",
    ("cuda", "dashboard_address"): ":8787 $(touch PWNED)",
    ("batch", "n_workers"): -1, ("batch", "cores"): "4; id", ("batch", "processes"): 0,
    ("batch", "memory"): "8GB$(id)", ("batch", "queue"): "q;id", ("batch", "project"): "$(id)",
    ("batch", "walltime"): "01:00:00; id", ("batch", "name"): "w$(id)",
    ("batch", "interface"): "ib0 --preload x", ("batch", "local_directory"): "/tmp/$(id)",
    ("batch", "log_directory"): "/tmp/`id`", ("batch", "python"): "/bin/sh",
    ("batch", "worker_extra_args"): ["--preload-nanny", "evil.py"],
    ("slurm", "job_extra_directives"): ["--export=LD_PRELOAD=/tmp/x.so"],
    ("pbs sge", "job_extra_directives"): ["-v LD_PRELOAD=/tmp/x.so"],
    ("lsf", "job_extra_directives"): ["-env LD_PRELOAD=/tmp/x.so"],
    ("batch", "job_script_prologue"): [["not", "a", "line"]],
    ("batch kubernetes", "env"): {"LD_PRELOAD": "/tmp/x.so"},
    ("batch kubernetes", "adapt"): {"Adaptive": "evil.Adaptive"},
    ("batch", "extra"): {"shebang": "#!/bin/sh"},
    ("slurm pbs", "account"): "a`id`", ("slurm", "job_cpu"): 1.5, ("slurm", "job_mem"): "8G;id",
    ("pbs", "resource_spec"): "prologue=x.sh", ("sge", "resource_spec"): "h_vmem=1G;id",
    ("lsf", "ncpus"): 0, ("lsf", "mem"): 10, ("lsf", "lsf_units"): "MB;id",
    ("lsf", "use_stdin"): "yes",
    ("ssh", "hosts"): ["-oProxyCommand=touch PWNED"],
    ("ssh", "connect_options"): {"proxy_command": "touch PWNED"},
    ("ssh", "worker_options"): {"preload": ["evil"]},
    ("ssh", "scheduler_options"): {"port": "0' ; touch PWNED '"},
    ("ssh", "remote_python"): "/usr/bin/env", ("ssh", "extra"): {"worker_class": "evil.Worker"},
    ("kubernetes", "name"): "a;b", ("kubernetes", "namespace"): "ns/x",
    ("kubernetes", "image"): "img; touch PWNED", ("kubernetes", "n_workers"): 0,
    ("kubernetes", "resources"): {"limits": {"cpu": "1'; id"}},
    ("kubernetes", "extra"): {"worker_command": ["python", "-c", "x"]},
}


def expand(kinds: str) -> list[str]:
    out: list[str] = []
    for word in kinds.replace(",", " ").split():
        out += list(KINDS) if word == "all" else list(BATCH_KINDS) if word == "batch" else [word]
    return out


HOSTILE_CASES = sorted((kind, field) for (kinds, field) in HOSTILE for kind in expand(kinds))


def documented() -> set[tuple[str, str]]:
    """(kind, field) pairs of the table in docs/security.md."""
    text = DOC.read_text()
    table = text.split("| field | kinds | where it goes | what it may hold |")[1].split("\n\n")[0]
    pairs = set()
    for row in table.strip().splitlines()[1:]:
        fields, kinds = row.split("|")[1:3]
        for field in re.findall(r"`([a-z_]+)`", fields):
            pairs |= {(kind, field) for kind in expand(kinds)}
    return pairs


def test_the_security_doc_lists_every_field_of_every_kind():
    known = {(kind, field) for kind, options in KINDS.items() for field in options}
    assert documented() == known


def test_every_field_has_a_hostile_value():
    known = {(kind, field) for kind, options in KINDS.items() for field in options}
    assert set(HOSTILE_CASES) == known


@pytest.mark.parametrize("kind, field", HOSTILE_CASES)
def test_a_hostile_value_of_each_field_is_refused_naming_it(kind, field):
    value = next(v for (kinds, f), v in HOSTILE.items() if f == field and kind in expand(kinds))
    base = {k: v for k, v in BASE[kind].items() if not (kind == "scheduler" and field ==
                                                           "scheduler_file")}
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": kind, **base, field: value})
    assert field in str(exc.value)
    # a mapping handed to connect() is held to the same checks
    with pytest.raises(ConfigError):
        resolve_spec({"kind": kind, **base, field: value})


# --- worker arguments: an allow-list ------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["--nthreads", "2"], ["--nworkers=4"], ["--memory-limit", "auto"], ["--memory-limit=3.5GiB"],
    ["--lifetime", "1h", "--lifetime-stagger=5m", "--lifetime-restart"], ["--no-dashboard"],
    ["--resources", "GPU=2,MEM=10e9"], ["--death-timeout", "60"], ["--local-directory", "/scratch/x"],
    ["--dashboard-address", ":0", "--worker-port", "9000:9100"], ["--protocol", "tcp"],
])
def test_harmless_worker_arguments_reach_the_worker_command(args):
    script = render_job_script({"kind": "slurm", **BATCH, "worker_extra_args": args})
    worker = next(ln for ln in script.splitlines() if "dask_worker" in ln)
    assert worker.endswith(" ".join(args))


@pytest.mark.parametrize("args, named", [
    (["--preload", "evil"], "'--preload'"), (["--preload=evil.py"], "'--preload=evil.py'"),
    (["--preload-nanny", "evil"], "'--preload-nanny'"), (["--preload-argv", "x"], "'--preload-argv'"),
    (["--worker-class", "evil.Worker"], "'--worker-class'"),
    (["--scheduler-file", "/tmp/s.json"], "'--scheduler-file'"),
    (["--pid-file", "/home/u/.bashrc"], "'--pid-file'"), (["--tls-key", "k.pem"], "'--tls-key'"),
    (["tcp://evil:8786"], "'tcp://evil:8786'"), (["-m", "timeit"], "'-m'"),
    (["--name", "--preload"], "'--preload'"), (["--nthreads"], "'--nthreads'"),
    (["--nanny=x"], "'--nanny=x'"), (["--nthreads", "2;id"], "'2;id'"),
    (["--memory-limit", "$(id)"], "'$(id)'"), ([3], "3"),
    # the scheduler, the other workers and the client would fetch results from that address
    (["--contact-address", "tcp://203.0.113.5:9000"], "'--contact-address'"),
    (["--contact-address=tcp://203.0.113.5:9000"], "'--contact-address=tcp://203.0.113.5:9000'"),
])
def test_other_worker_arguments_are_refused(args, named):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": "slurm", **BATCH, "worker_extra_args": args})
    assert "worker_extra_args" in str(exc.value) and named in str(exc.value)


# --- extra: an allow-list of dask-jobqueue keywords ---------------------------------------------

@pytest.mark.parametrize("key", ["worker_command", "shebang", "python", "env_extra",
                                 "job_script_prologue", "extra", "job_extra", "header_skip",
                                 "config_name", "scheduler_options", "security", "job_cls",
                                 "scheduler_cls", "n_workers"])
def test_extra_keys_that_change_what_runs_are_refused(key):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": "pbs", **BATCH, "extra": {key: "x"}})
    assert f"extra.{key} is not accepted" in str(exc.value)


def test_harmless_extra_keys_reach_the_script():
    script = render_job_script({"kind": "slurm", **BATCH, "extra": {
        "death_timeout": 30, "nanny": False, "job_name": "ds-w", "job_directives_skip": ["-n 1"],
        "walltime": "00:05:00"}})
    lines = script.splitlines()
    worker = next(ln for ln in lines if "dask_worker" in ln)
    assert "--no-nanny" in worker and "--death-timeout 30" in worker
    assert "#SBATCH -J ds-w" in lines and "#SBATCH -t 00:05:00" in lines
    assert "#SBATCH -n 1" not in lines


def test_the_site_configuration_cannot_change_the_command_or_the_shebang():
    import dask

    with dask.config.set({"jobqueue.slurm.worker-command": "timeit",
                          "jobqueue.slurm.shebang": "#!/usr/bin/env -S python -c pass"}):
        lines = render_job_script({"kind": "slurm", **BATCH}).splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert " -m distributed.cli.dask_worker " in next(ln for ln in lines if "dask_worker" in ln)


# --- environment names ------------------------------------------------------------------------

@pytest.mark.parametrize("key, value", [
    ("OMP_NUM_THREADS", 1), ("MALLOC_TRIM_THRESHOLD_", 0), ("PYTHONUNBUFFERED", "1"),
    ("DASK_DISTRIBUTED__WORKER__MEMORY__TARGET", 0.8), ("DASK_TEMPORARY_DIRECTORY", "/scratch"),
    ("TMPDIR", "/a b/c"), ("LC_ALL", "en_US.UTF-8"), ("TZ", "Europe/Paris"),
    ("CUDA_VISIBLE_DEVICES", "0,1"), ("AWS_ACCESS_KEY_ID", "AKIA123"),
    ("AWS_ENDPOINT_URL", "https://s3.example.org"), ("NCCL_DEBUG", "WARN"),
    ("PYTHONIOENCODING", "utf-8:replace"),
])
def test_plain_environment_is_exported(key, value):
    script = render_job_script({"kind": "sge", **BATCH, "env": {key: value}})
    assert any(ln.startswith(f"export {key}=") for ln in script.splitlines())


@pytest.mark.parametrize("key, value", [
    ("DASK_DISTRIBUTED__WORKER__MEMORY__TARGET", "{'x': 1}"),
    ("DASK_DISTRIBUTED__WORKER__MEMORY__TARGET", "[1]"),
    ("DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON__LD_PRELOAD", "/tmp/x.so"),
    ("DASK_INTERNAL_INHERIT_CONFIG", "e30="), ("DASK_DISTRIBUTED__LOGGING", "x"),
    ("DASK_ROOT_CONFIG", "/tmp"), ("BASH_FUNC_x", "() { id; }"), ("OPENSSL_CONF", "/tmp/c"),
    ("PYTHONUSERBASE", "/tmp"), ("PS4", "$(id)"), ("JAVA_TOOL_OPTIONS", "-javaagent:x"),
])
def test_environment_that_loads_code_or_configuration_is_refused(key, value):
    for kind in ("slurm", "kubernetes"):
        with pytest.raises(ConfigError) as exc:
            validate_spec({"kind": kind, **BASE[kind], "env": {key: value}})
        assert f"env {key}" in str(exc.value) and "job_script_prologue" in str(exc.value)


# --- batch directives -------------------------------------------------------------------------

@pytest.mark.parametrize("kind, directive", [
    ("slurm", "--export=ALL,LD_PRELOAD=/tmp/x.so"), ("slurm", "-o /home/u/.bashrc"),
    ("slurm", "-o/home/u/.bashrc"), ("slurm", "--chdir=/tmp"), ("slurm", "--get-user-env"),
    ("slurm", "--bb=capacity=1G"), ("pbs", "-v LD_PRELOAD=/tmp/x.so"), ("pbs", "-S /tmp/sh"),
    ("pbs", "-l prologue=/tmp/x.sh"), ("pbs", "-W stagein=x@h:/y"), ("sge", "-S /tmp/sh"),
    ("slurm", "--exp=LD_PRELOAD=/tmp/x.so"), ("slurm", "--outp=/home/u/.bashrc"),
    ("pbs", "-lprologue=/tmp/x.sh"), ("pbs", "-vLD_PRELOAD=/tmp/x.so"),
    ("sge", "-v PYTHONPATH=/tmp"), ("sge", "-@ /tmp/opts"), ("lsf", "-E /tmp/pre.sh"),
    ("lsf", "-Ep /tmp/post.sh"), ("lsf", "-env all"), ("lsf", "-L /tmp/sh"),
])
def test_directives_that_set_environment_shell_files_or_commands_are_refused(kind, directive):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": kind, **BATCH, "job_extra_directives": [directive]})
    assert "job_extra_directives" in str(exc.value) and repr(directive) in str(exc.value)


@pytest.mark.parametrize("kind, directive", [
    ("slurm", "--exclusive"), ("slurm", "--gres=gpu:1"), ("slurm", "-C haswell"),
    ("pbs", "-l place=scatter"), ("pbs", "-m abe"), ("sge", "-pe smp 4"), ("lsf", '-R "span[hosts=1]"'),
    ("slurm", "-p gpu --qos=high"), ("slurm", "--partition gpu"), ("slurm", "-pgpu"),
    ("slurm", "-HJname"), ("slurm", "--mail-type=END,FAIL --mail-user=a@b.org"),
    ("slurm", "--gpus-per-node=4 --constraint=a100 --signal=B:USR1@60"),
    ("slurm", "--exclusive=user --nice=10 --requeue"), ("slurm", "-A proj -M cl1 -L lic:1"),
    ("pbs", "-l nodes=1:ppn=8"), ("pbs", "-W group_list=abc"), ("pbs", "-p -100 -r y"),
    ("pbs", "-hn"), ("sge", "-binding linear:1"), ("sge", "-pe smp 4 -R y -now n"),
    ("lsf", '-R "rusage[mem=4000] span[hosts=1]"'), ("lsf", "-x -app big -sla gold"),
])
def test_ordinary_directives_reach_the_script(kind, directive):
    script = render_job_script({"kind": kind, **BATCH, "job_extra_directives": [directive]})
    assert any(ln.endswith(directive) for ln in script.splitlines())


@pytest.mark.parametrize("key, value", [
    ("name", "--preload"), ("queue", "-x"), ("local_directory", "--preload=evil"),
    ("interface", "-m"), ("resource_spec", "-h_vmem=1G"), ("walltime", "-1:00"),
])
def test_a_value_that_would_read_as_a_flag_is_refused(key, value):
    with pytest.raises(ConfigError, match=f"{key} = {re.escape(repr(value))}"):
        validate_spec({"kind": "sge", **BATCH, key: value})


def test_adaptive_bounds_are_accepted():
    adapt = {"minimum": 1, "maximum": 4, "maximum_memory": "64GB", "interval": "1s"}
    assert validate_spec({"kind": "slurm", **BATCH, "adapt": adapt})["adapt"] == adapt


def test_the_prologue_is_the_one_field_written_as_code():
    line = 'export DASK_DISTRIBUTED__WORKER__PRELOAD=mymodule; echo "$HOME"'
    script = render_job_script({"kind": "slurm", **BATCH, "job_script_prologue": [line],
                                "python": sys.executable})
    lines = script.splitlines()
    worker = next(i for i, ln in enumerate(lines) if "dask_worker" in ln)
    assert lines.index(line) < worker  # as written, before the worker starts


# --- the reported holes: line breaks through the patterns, bundled directives, env names -------

@pytest.mark.parametrize("kind, field, value, named", [
    # `\s?` in the duration and memory patterns used to match a line break
    ("slurm", "worker_extra_args", ["--lifetime", "2\nid"], "worker_extra_args = '2\\nid'"),
    ("pbs", "worker_extra_args", ["--memory-limit=4\nGB"], "worker_extra_args = '4\\nGB'"),
    ("sge", "worker_extra_args", ["--death-timeout", "60\r"], "worker_extra_args = '60\\r'"),
    ("slurm", "extra", {"death_timeout": "2\nid"}, "death_timeout = '2\\nid'"),
    ("lsf", "extra", {"death_timeout": "60\n"}, "death_timeout = '60\\n'"),
    ("slurm", "job_mem", "4\nGB", "job_mem = '4\\nGB'"),
    ("pbs", "memory", "4\nGB", "memory = '4\\nGB'"),
    ("slurm", "adapt", {"interval": "1\ns"}, "adapt.interval = '1\\ns'"),
    ("kubernetes", "adapt", {"maximum": "5\nm"}, "adapt.maximum = '5\\nm'"),
    ("local", "memory_limit", "4\nGB", "memory_limit = '4\\nGB'"),
    ("cuda", "device_memory_limit", "4\nGB", "device_memory_limit = '4\\nGB'"),
    ("cuda", "cuda_visible_devices", "0\n,1", "cuda_visible_devices = '0\\n,1'"),
    # a space is a word break where the value is written unquoted
    ("slurm", "extra", {"death_timeout": "60 s"}, "death_timeout = '60 s'"),
    ("slurm", "job_mem", "4 G", "job_mem = '4 G'"),
    # non-ASCII digits and letters that `\d` / IGNORECASE `[a-z]` used to take
    ("sge", "walltime", "\uff10\uff11:00:00", "walltime = "),
    ("slurm", "worker_extra_args", ["--lifetime", "1\u017f"], "worker_extra_args = '1\u017f'"),
    # numbers that are not sizes
    ("slurm", "memory", float("inf"), "memory = inf"),
    ("slurm", "extra", {"death_timeout": float("nan")}, "death_timeout = nan"),
    # a string where dask-jobqueue iterates a list, character by character
    ("slurm", "extra", {"worker_extra_args": "--no-nanny"}, "worker_extra_args = '--no-nanny'"),
    ("pbs", "extra", {"job_directives_skip": "-q"}, "job_directives_skip = '-q'"),
])
def test_a_line_break_or_word_break_in_a_value_is_refused(kind, field, value, named):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": kind, **BASE[kind], field: value})
    assert named in str(exc.value)


@pytest.mark.parametrize("key, value", [
    ("LOKY_PICKLER", "evil_module"),            # joblib imports it in every worker
    ("AWS_SHARED_CREDENTIALS_FILE", "/tmp/c"),  # boto3 runs its credential_process
    ("OMP_TOOL_LIBRARIES", "/tmp/tool.so"),     # the OpenMP runtime loads it
    ("ZARR_CODEC_PIPELINE__PATH", "evil.Pipeline"), ("NCCL_NET_PLUGIN", "/tmp/net.so"),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/tmp/exec.json"), ("NUMBA_CACHE_DIR", "/tmp/c"),
    ("HDF5_PLUGIN_PATH", "/tmp/p"), ("omp_num_threads", "1"), ("DS_SETTING", "x"),
])
def test_environment_outside_the_allow_list_is_refused(key, value):
    for kind in ("slurm", "pbs", "kubernetes"):
        with pytest.raises(ConfigError) as exc:
            validate_spec({"kind": kind, **BASE[kind], "env": {key: value}})
        message = str(exc.value)
        assert f"env {key}" in message and "not among the variables" in message
        assert f"export {key} in job_script_prologue" in message


@pytest.mark.parametrize("key, value", [
    ("LANG", "/tmp/evil_locale"), ("LC_ALL", "../../tmp/x"), ("PYTHONIOENCODING", "x/y"),
    ("OMP_NUM_THREADS", "1\x0b2"), ("TMPDIR", "/tmp\u2028x"), ("TZ", "UTC\x1b[2J"),
])
def test_allowed_environment_names_take_only_plain_values(key, value):
    for kind in ("sge", "kubernetes"):
        with pytest.raises(ConfigError) as exc:
            validate_spec({"kind": kind, **BASE[kind], "env": {key: value}})
        assert f"env {key} = {value!r}" in str(exc.value)


@pytest.mark.parametrize("kind, directive, refused", [
    # getopt reads a group letter by letter: -Qo/x is -Q -o /x
    ("slurm", "-Ho/home/u/.bashrc", "-o"), ("slurm", "-Oe/home/u/.bashrc", "-e"),
    ("slurm", "-Hi/etc/passwd", "-i"), ("slurm", "-vD/tmp", "-D"),
    ("pbs", "-ho/home/u/.bashrc", "-o"), ("pbs", "-hvLD_PRELOAD=/tmp/x.so", "-v"),
    ("pbs", "-nS/tmp/sh", "-S"),
    # an option after the first one on the line
    ("slurm", "-p gpu -o /home/u/.bashrc", "-o"), ("slurm", "--partition gpu --export=ALL", "--export"),
    ("pbs", "-q x -V", "-V"), ("sge", "-l h_vmem=1G -S /tmp/sh", "-S"),
    ("lsf", "-n 4 -env all", "-env"),
    # attached values and whole words of bsub / SGE's qsub
    ("lsf", "-Etouch", "-Etouch"), ("lsf", "-otouch", "-otouch"), ("lsf", "-rnc /tmp/x.sh", "-rnc"),
    ("sge", "-jsv /tmp/x.sh", "-jsv"), ("sge", "-shell n", "-shell"),
    # abbreviations getopt_long expands, and options outside the allow-list
    ("slurm", "--part=gpu --outp=/x", "--outp"), ("slurm", "--container-image=evil/img", "--container-image"),
    ("pbs", "-T myprologue", "-T"),
    # a quote that hides an option from one reader but not from another
    ("slurm", '--comment="x --output=/home/u/.bashrc"', "--output"),
    # what readers disagree on
    ("slurm", "--comment=a\\ -o/x", "'\\\\'"), ("slurm", "--exclusive # -o /x", "'#'"),
])
def test_directives_are_read_as_the_batch_system_reads_them(kind, directive, refused):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": kind, **BATCH, "job_extra_directives": [directive]})
    message = str(exc.value)
    assert f"job_extra_directives = {directive!r}" in message and refused in message


def test_an_abbreviated_long_option_is_refused_with_its_full_name():
    with pytest.raises(ConfigError, match=r"--part is not among .* write options in full "
                                          r"\(--partition\)"):
        validate_spec({"kind": "slurm", **BATCH, "job_extra_directives": ["--part=gpu"]})


# sbatch's and PBS qsub's own option letters (getopt syntax; ':' takes a value), the
# refused ones included: Python's getopt reads a directive line as they do
SBATCH_GETOPT = "A:b:B:c:C:d:D:e:F:G:hHi:J:kL:m:M:n:N:o:Op:q:QsS:t:uvVw:Wx:"
SBATCH_LONG = ["output=", "error=", "input=", "chdir=", "export=", "partition=", "exclusive",
               "get-user-env", "qos=", "time="]
QSUB_GETOPT = "a:A:c:C:d:D:e:hIj:J:k:l:m:M:N:o:p:P:q:r:S:t:T:u:v:VW:Xz"
REFUSED_LETTERS = {"slurm": {"-o", "-e", "-i", "-D", "-F", "--output", "--error", "--input",
                             "--chdir", "--export", "--get-user-env"},
                   "pbs": {"-o", "-e", "-v", "-V", "-S", "-d", "-D", "-C", "-I", "-T", "-u",
                           "-X", "-J", "-t"}}


def getopt_reads(kind: str, directive: str) -> set[str]:
    """The options a getopt-based batch system reads from a directive line."""
    import getopt
    import shlex

    words = shlex.split(directive)
    if kind == "slurm":
        options, _ = getopt.gnu_getopt(words, SBATCH_GETOPT, SBATCH_LONG)
    else:
        options, _ = getopt.getopt(words, QSUB_GETOPT)
    return {name for name, _ in options}


@pytest.mark.parametrize("kind, directive", [
    ("slurm", "-Qo/home/u/.bashrc"), ("slurm", "-Oe/home/u/.bashrc"), ("slurm", "-vD/tmp"),
    ("slurm", "-p gpu --exp=LD_PRELOAD=/x"),
    ("pbs", "-ho/home/u/.bashrc"), ("pbs", "-hvLD_PRELOAD=/tmp/x.so"), ("pbs", "-zS/tmp/sh"),
])
def test_what_getopt_reads_as_a_refused_option_is_refused(kind, directive):
    # the stand-in reads the payload as the batch system would: it does set a refused option
    assert getopt_reads(kind, directive) & REFUSED_LETTERS[kind]
    with pytest.raises(ConfigError, match="job_extra_directives"):
        validate_spec({"kind": kind, **BATCH, "job_extra_directives": [directive]})


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_no_accepted_directive_sets_a_refused_option(kind):
    """Every line of a few letters and words that the validator accepts, read by getopt."""
    import itertools

    letters = sorted({c for c in (SBATCH_GETOPT if kind == "slurm" else QSUB_GETOPT)
                      if c != ":"})
    groups = ["-" + "".join(p) for p in itertools.product(letters, repeat=2)]
    lines = groups + [f"{g}/x" for g in groups] + [f"{g} /x" for g in groups]
    accepted = 0
    for line in lines:
        try:
            validate_spec({"kind": kind, **BATCH, "job_extra_directives": [line]})
        except ConfigError:
            continue
        accepted += 1
        assert not getopt_reads(kind, line) & REFUSED_LETTERS[kind], line
    assert accepted > 100  # the allow-list still accepts ordinary groups such as -HJname


# --- values that crashed, hung, or reached files and hosts past the worker ------------------------

@pytest.mark.parametrize("cfg, named", [
    # a kind that is not a string: a TypeError (unhashable) from the kind look-up
    ({"kind": ["slurm"]}, "unknown cluster kind ['slurm']"),
    ({"kind": {"slurm": 1}}, "unknown cluster kind {'slurm': 1}"),
    # whole numbers Python will not format (past 4300 digits) or no batch system reads
    ({"kind": "slurm", **BATCH, "cores": 16**2000}, "cores is a whole number of 8001 bits"),
    ({"kind": "slurm", **BATCH, "env": {"OMP_NUM_THREADS": 10**5000}},
     "env.OMP_NUM_THREADS is a whole number of"),
    ({"kind": "lsf", **BATCH, "mem": 10**400}, "mem is a whole number of"),
    ({"kind": 10**5000}, "kind is a whole number of"),
    # sizes whose bytes overflow a float (OverflowError in dask-jobqueue / LocalCluster)
    ({"kind": "slurm", "cores": 1, "memory": "1" + "0" * 400 + "GB"}, "memory = '1000"),
    ({"kind": "pbs", "cores": 1, "memory": 1e300}, "memory = 1e+300"),
    ({"kind": "local", "memory_limit": "9" * 400 + "TB"}, "memory_limit = '999"),
    ({"kind": "local", "memory_limit": float("inf")}, "memory_limit = inf"),
    ({"kind": "cuda", "rmm_pool_size": "9" * 400 + "GB"}, "rmm_pool_size = '999"),
    ({"kind": "lsf", **BATCH, "mem": 1e300}, "mem = 1e+300"),
    # a unit dask-jobqueue looks up in a table (KeyError)
    ({"kind": "lsf", **BATCH, "lsf_units": "XB"}, "lsf_units = 'XB'"),
    # timeouts Client cannot use (KeyError, ValueError) or waits on forever
    ({"kind": "scheduler", "address": "tcp://127.0.0.1:1", "timeout": float("nan")}, "timeout = nan"),
    ({"kind": "scheduler", "address": "tcp://127.0.0.1:1", "timeout": float("inf")}, "timeout = inf"),
    ({"kind": "slurm", **BATCH, "timeout": -1}, "timeout = -1"),
    ({"kind": "ssh", "hosts": ["a"], "timeout": 0}, "timeout = 0"),
])
def test_values_that_crashed_the_validator_or_the_cluster_are_refused(cfg, named):
    with pytest.raises(ConfigError) as exc:
        validate_spec(cfg)
    assert named in str(exc.value)


@pytest.mark.parametrize("text, named", [
    ("kind: slurm\ncores: 1\nmemory: 1GB\nn_workers: " + "9" * 5000, "cannot be read"),
    ("kind: slurm\ncores: 1\nmemory: 1GB\nwalltime: 2001-13-45", "cannot be read"),
    ("kind: slurm\ncores: 0x" + "f" * 3000 + "\nmemory: 1GB", "cores is a whole number of"),
])
def test_a_spec_file_with_an_unreadable_number_is_a_config_error(tmp_path, text, named):
    from distsketch.cluster import load_spec

    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_spec(path)
    assert named in str(exc.value) and str(path) in str(exc.value)


@pytest.mark.parametrize("kind, field, value, named", [
    # SpecCluster.scale and SSHCluster loop once per worker: 1e18 never ends
    ("slurm", "n_workers", 1e18, "n_workers = 1e+18"),
    ("pbs", "processes", 10**9, "processes = 1000000000"),
    ("local", "n_workers", 1e9, "n_workers = 1000000000.0"),
    ("kubernetes", "n_workers", 10**9, "n_workers = 1000000000"),
    ("ssh", "worker_options", {"n_workers": 10**9}, "worker_options.n_workers = 1000000000"),
])
def test_counts_beyond_any_deployment_are_refused(kind, field, value, named):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": kind, **BASE[kind], field: value})
    assert named in str(exc.value)


@pytest.mark.parametrize("kind, adapt, named", [
    ("slurm", {"interval": 0}, "adapt.interval = 0"),     # a callback every 0 ms
    ("slurm", {"interval": -1}, "adapt.interval = -1"),
    ("slurm", {"minimum": 5, "maximum": 1}, "adapt.minimum = 5 is above adapt.maximum = 1"),
    ("sge", {"minimum": "5 m"}, "adapt.minimum = '5 m'"),
    ("lsf", {"maximum": float("nan")}, "adapt.maximum = nan"),
    ("slurm", {"wait_count": 0}, "adapt.wait_count = 0"),
    ("slurm", {"target_duration": "5 fortnights"}, "adapt.target_duration = '5 fortnights'"),
    # the operator's adapt() takes minimum and maximum only (a TypeError once started)
    ("kubernetes", {"interval": "1s"}, "adapt.interval is not accepted"),
])
def test_adaptive_settings_that_fail_or_spin_once_started_are_refused(kind, adapt, named):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": kind, **BASE[kind], "adapt": adapt})
    assert named in str(exc.value)


@pytest.mark.parametrize("kind, directive, named, plain", [
    # sbatch reads a host list holding "/" as a file on the submitting machine
    ("slurm", "-w /etc/shadow", "sbatch reads a value with '/' as a file", "-w node[01-04]"),
    ("slurm", "-w/etc/shadow", "sbatch reads a value with '/' as a file", "-wnode1"),
    ("slurm", "-x /dev/zero", "sbatch reads a value with '/' as a file", "-x node07"),
    ("slurm", "--exclude=/home/u/hosts", "sbatch reads a value with '/' as a file",
     "--exclude=node07,node08"),
    ("slurm", "--nodelist /home/u/hosts", "sbatch reads a value with '/' as a file",
     "--nodelist node1"),
    ("slurm", "-p gpu -Hw/etc/passwd", "sbatch reads a value with '/' as a file", "-p gpu -H"),
    # a job name with [..] is an LSF job array: one job per index, per worker asked for
    ("lsf", '-J "w[1-100000]"', "makes a job array", "-J dask-worker"),
    ("lsf", "-n 1 -J w[1-9]%2", "makes a job array", "-n 1 -J w"),
    # no job id printed: the job runs, and is never tracked nor cancelled
    ("slurm", "--quiet", "--quiet is not among", "--verbose"),
    ("slurm", "-Q", "-Q is not among", "-v"), ("slurm", "-HQ", "-Q (", "-Hv"),
    ("pbs", "-z", "-z is not among", "-h"), ("pbs", "-hz", "-z (", "-hn"),
    ("sge", "-w v", "only -w e, -w w or -w n", "-w e"),
    ("sge", "-w p", "only -w e, -w w or -w n", "-w n"),
    # Torque's suffixed prologue / epilogue resources
    ("pbs", "-l epilogue.precancel=/tmp/x.sh", "names a script to run", "-l nodes=1:ppn=4"),
    ("pbs", "-lprologue.parallel=/tmp/x.sh", "names a script to run", "-lwalltime=1:00:00"),
    # shell expansions: bash never runs a directive line, but no reader should meet one
    ("slurm", "--comment=$(touch PWNED)", "it holds '$'", "--comment=plain"),
    ("lsf", "-J `touch PWNED`", "it holds '`'", "-J w"),
    ("sge", "-N ${IFS}x", "it holds '$'", "-N x"),
])
def test_directives_that_read_files_make_arrays_or_hide_the_job_are_refused(kind, directive,
                                                                            named, plain):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": kind, **BATCH, "job_extra_directives": [directive]})
    message = str(exc.value)
    assert f"job_extra_directives = {directive!r}" in message and named in message
    # the same option with a plain value still reaches the script
    script = render_job_script({"kind": kind, **BATCH, "job_extra_directives": [plain]})
    assert any(ln.endswith(plain) for ln in script.splitlines())


@pytest.mark.parametrize("kind", list(BATCH_KINDS))
@pytest.mark.parametrize("log_directory, why", [
    ("~/logs", "leading '~'"),            # neither makedirs nor the batch system expands it
    ("evil.example.org:/tmp", "':'"),     # PBS / SGE copy the output to that host
])
def test_log_directories_that_are_not_local_paths_are_refused(kind, log_directory, why, tmp_path,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as exc:
        render_job_script({"kind": kind, **BATCH, "log_directory": log_directory})
    assert f"log_directory = {log_directory!r}" in str(exc.value) and why in str(exc.value)
    assert list(tmp_path.iterdir()) == []  # no folder "~" (or "evil.example.org:") made
    # a path of this machine is still the folder of the output files
    script = render_job_script({"kind": kind, **BATCH, "log_directory": str(tmp_path / "logs")})
    assert f"{tmp_path / 'logs'}/" in script and (tmp_path / "logs").is_dir()


@pytest.mark.parametrize("known_hosts", [None, [], "", False, [None]])
def test_ssh_host_key_checking_cannot_be_turned_off(known_hosts):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": "ssh", "hosts": ["node0", "node1"],
                       "connect_options": {"known_hosts": known_hosts}})
    assert "connect_options.known_hosts" in str(exc.value)
    # files of known hosts are what it may name
    for files in ("/etc/ssh/ssh_known_hosts", ["/etc/ssh/ssh_known_hosts", "/home/u/kh"]):
        cfg = {"kind": "ssh", "hosts": ["node0"], "connect_options": {"known_hosts": files}}
        assert validate_spec(cfg)["connect_options"] == {"known_hosts": files}


@pytest.mark.parametrize("service", ["LoadBalancer", "NodePort", "ExternalName"])
def test_kubernetes_scheduler_is_not_exposed_outside_the_cluster(service):
    with pytest.raises(ConfigError) as exc:
        validate_spec({"kind": "kubernetes", **BASE["kubernetes"],
                       "extra": {"scheduler_service_type": service}})
    assert f"extra.scheduler_service_type = {service!r}" in str(exc.value)
    assert "ClusterIP" in str(exc.value)
    cfg = {"kind": "kubernetes", **BASE["kubernetes"],
           "extra": {"scheduler_service_type": "ClusterIP"}, "adapt": {"minimum": 0, "maximum": 4}}
    assert validate_spec(cfg)["extra"] == {"scheduler_service_type": "ClusterIP"}
