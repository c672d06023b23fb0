"""What the commands say about themselves: help, versions, usage errors."""

import subprocess
import sys

import pytest

from tfmesos import __version__

TFRUN = [sys.executable, "-m", "tfmesos.cli.tfrun"]
TFMESOS = [sys.executable, "-m", "tfmesos.cli.main"]


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_tfmesos_help_is_plain_text_listing_the_commands():
    result = run(TFMESOS + ["--help"])
    assert result.returncode == 0 and "``" not in result.stdout
    for command in ("local-master", "docker", "version"):
        assert "\n  %s " % command in result.stdout


@pytest.mark.parametrize("argv, usage", [
    (TFRUN, "usage: tfrun [options] -- COMMAND [ARGS...]"),
    (TFMESOS + ["docker"], "usage: tfmesos docker [options] -- COMMAND [ARGS...]"),
    (TFMESOS + ["local-master"], "usage: tfmesos local-master "),
])
def test_help_names_the_command_as_it_is_typed(argv, usage):
    result = run(argv + ["--help"])
    assert result.returncode == 0 and result.stdout.startswith(usage)


@pytest.mark.parametrize("argv, text", [(TFRUN, "tfrun (tfmesos) %s" % __version__),
                                        (TFMESOS, "tfmesos %s" % __version__)])
def test_version(argv, text):
    result = run(argv + ["--version"])
    assert result.returncode == 0 and result.stdout.strip() == text


def test_a_forgotten_double_dash_is_named():
    result = run(TFRUN + ["-w", "1", "python", "examples/replica_hello.py"])
    assert result.returncode == 2
    assert ("put the command after '--': tfrun -w 1 -- python examples/replica_hello.py"
            in result.stderr)


@pytest.mark.parametrize("argv, suggestion", [
    # -c is the command's (python's), not tfrun's --chief; the quoting stays.
    (TFRUN + ["-w", "2", "-s", "0", "python", "-c", "print(1)"],
     "tfrun -w 2 -s 0 -- python -c 'print(1)'"),
    (TFRUN + ["--job", "worker:2", "python3", "my script.py", "--lr", "0.1"],
     "tfrun --job worker:2 -- python3 'my script.py' --lr 0.1"),
    # what came after a later '--' is kept after it
    (TFMESOS + ["docker", "-i", "img", "tfrun", "-w", "2", "--", "python", "-c", "print(1)"],
     "tfmesos docker -i img -- tfrun -w 2 -- python -c 'print(1)'"),
])
def test_the_double_dash_suggestion_keeps_the_users_words_and_quoting(argv, suggestion):
    result = run(argv)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 2, result.stderr
    assert "put the command after '--': %s (" % suggestion in lines[1], result.stderr


def test_unknown_options_are_named_without_a_suggestion():
    result = run(TFRUN + ["-w", "2", "--nope", "python", "x"])
    assert result.returncode == 2
    assert "unrecognized arguments: --nope python x" in result.stderr
    assert "put the command after" not in result.stderr


@pytest.mark.parametrize("argv", [
    ["runs", "stray", "-n", "3"],
    ["show", "abc", "stray", "--runs-dir", "/nonexistent"],
    ["report", "--runs-dir", "/nonexistent", "abc", "stray", "-o", "x.html"],
    ["kill", "abc", "stray", "--master", "127.0.0.1:1"],
    ["attach", "--master", "127.0.0.1:1", "abc", "stray"],
])
def test_a_subcommand_without_a_command_names_a_stray_word_without_a_suggestion(argv):
    # Only tfrun and tfmesos docker run a command after '--': "put the command
    # after '--'" told show, kill and the others to do what they cannot.
    result = run(TFMESOS + argv)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 2, result.stderr
    assert lines[1].startswith("tfmesos %s: error: unrecognized arguments: stray (" % argv[0]), \
        result.stderr


@pytest.mark.parametrize("args", [["-w", "x", "--", "true"], [], ["--nope", "--", "true"]])
def test_usage_errors_are_two_lines(args):
    result = run(TFRUN + args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 2, result.stderr
    assert lines[0] == "usage: tfrun [options] -- COMMAND [ARGS...]"
    assert lines[1].startswith("tfrun: error: ") and lines[1].endswith(
        "(tfrun --help explains every option)")


@pytest.mark.parametrize("option, error", [
    (["-e", "=x"], "invalid environment entry '=x'"),
    (["-v", "data:/data"], "invalid volume 'data:/data'"),
])
def test_tfmesos_docker_bad_options_are_usage_errors(option, error):
    # Refused before the Docker engine is asked anything.
    result = run(TFMESOS + ["docker", *option, "--", "true"])
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 2, result.stderr
    assert lines[0] == "usage: tfmesos docker [options] -- COMMAND [ARGS...]"
    assert lines[1].startswith("tfmesos docker: error: %s" % error), result.stderr


# Each also has an error of its own (--job x, -e =x): should an abbreviation
# pass again, it still runs nothing.
@pytest.mark.parametrize("argv, error", [
    # argparse would read --worker as --worker-logs: never guess.
    (TFRUN + ["--worker", "2", "--job", "x", "--", "true"],
     "tfrun: error: unrecognized arguments: --worker 2; did you mean --nworker or "
     "--worker-logs? (tfrun --help explains every option)"),
    (TFRUN + ["--run", "d", "--job", "x", "--", "true"], "tfrun: error: unrecognized arguments: "
     "--run d; did you mean --run-dir?"),
    (TFMESOS + ["runs", "--lim", "3", "--keep", "1"], "tfmesos runs: error: unrecognized "
     "arguments: --lim 3; did you mean --limit?"),
    (TFMESOS + ["logs", "--std", "--runs-dir", "/nonexistent", "abc"], "tfmesos logs: error: "
     "unrecognized arguments: --std; did you mean --stderr?"),
    (TFMESOS + ["docker", "--ima", "x", "-e", "=x", "--", "true"], "tfmesos docker: error: "
     "unrecognized arguments: --ima x; did you mean --image?"),
])
def test_abbreviated_options_are_refused_naming_the_option(argv, error):
    result = run(argv)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 2, result.stderr
    assert lines[1].startswith(error), result.stderr


@pytest.mark.parametrize("argv", [TFMESOS + ["local-master"], [sys.executable, "-m",
                                                               "mesos_local"]])
def test_the_embedded_master_takes_no_abbreviations_either(argv):
    # --host would take it (and refuse the address for want of --credentials).
    result = run(argv + ["--hos", "10.0.0.1"])
    assert result.returncode == 2 and "unrecognized arguments: --hos 10.0.0.1" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command, name", [
    (["python", "train.py", "--job_name", "{job_name}"], "train.py"),
    (["python3", "-u", "-W", "ignore", "examples/keras_multiworker.py"], "keras_multiworker.py"),
    (["/opt/venv/bin/python3.11", "-m", "trainer.task", "--lr", "1"], "trainer.task"),
    (["python -u /work/train.py {task_index}"], "train.py"),     # one word: a shell line
    (["env", "CUDA_VISIBLE_DEVICES=", "python", "train.py"], "train.py"),
    (["OMP_NUM_THREADS=1 exec python3 -mtrainer.task"], "trainer.task"),
    (["bash", "run.sh", "1"], "run.sh"),
    (["sh", "-c", "echo hi"], "sh"),
    (["python", "-c", "print(1)"], "python"),
    (["echo {job_name} ok; sleep 1"], "echo"),
    (["./scripts/train"], "train"),
    (["it's unbalanced"], "it's"),
    (["python3", "tab\there.py"], "tab_here.py"),   # no run's name holds a control character
    (["python3 'a\x1b[31mred\x7f.py'"], "a_[31mred_.py"),
])
def test_a_run_is_named_after_its_script(command, name):
    from tfmesos.cli.run_name import default_name
    assert default_name(command) == name


def test_a_script_named_with_a_control_character_names_the_run_without_it(monkeypatch):
    """tfrun -- python3 $'tab\\there.py' was refused: "the run's name (-n)
    must be at most 200 characters, none of them a control character",
    though -n was not given."""
    from tfmesos.cli.tfrun_options import build_parser, command_string, read_options
    monkeypatch.setenv("MESOS_MASTER", "")
    words = ["python3", "tab\there.py"]
    args = build_parser().parse_options(["-s", "0"], words)
    assert read_options(args, command_string(words)).name == "tab_here.py"


def test_tfmesos_docker_from_a_deleted_directory_is_a_usage_error(tmp_path):
    # A traceback (FileNotFoundError from os.getcwd), where tfrun says it in
    # one line (found by a review helper).
    gone = tmp_path / "gone"
    gone.mkdir()
    result = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh",
                             str(gone)] + TFMESOS + ["docker", "--", "true"],
                            capture_output=True, text=True, timeout=60)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and lines[-1].startswith(
        "tfmesos docker: error: the current directory no longer exists"), result.stderr
