"""Where ``tfmesos report`` writes: report.html goes into the run directory
only when it is the caller's alone, and nothing another user could
change lies on the way to it (``run_dirs.check_own_dir``); else one line
names -o FILE. The report is written to a new file of its own, which
then replaces its path: a link planted there (report.html, or the output
named with -o in a shared directory) is replaced, never written through."""

import os
import stat

from local_users import nobody
from run_dirs import write_run

from tfmesos.cli.main import main

RUN = "aaaa0001"
FIX = ", who could redirect its report: write it to a file of your own (-o FILE)"


def report(capsys, *args):
    """(exit status, stdout, stderr's one line) of ``tfmesos report ARGS``."""
    code = main(["report", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == (1 if code else 0), err
    return code, out, lines[0] if lines else ""


def precious(tmp_path):
    """A file of the caller's that no report may overwrite."""
    place = tmp_path / "rootonly"
    place.mkdir(mode=0o700)
    target = place / "precious"
    target.write_text("precious\n")
    return target


def test_a_run_directory_another_user_owns_gets_no_report(tmp_path, capsys):
    other = nobody("giving a directory to another user needs root")
    target = precious(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    planted = write_run(runs, RUN)
    os.symlink(target, os.path.join(planted, "report.html"))
    for path in (planted, os.path.join(planted, "run.json")):
        os.chown(path, other.pw_uid, other.pw_gid)
    os.lchown(os.path.join(planted, "report.html"), other.pw_uid, other.pw_gid)
    code, out, line = report(capsys, "--runs-dir", str(runs), RUN)
    assert (code, out) == (1, ""), line
    assert line == "tfmesos: error: the run directory %s belongs to %s (uid %d)" % (
        planted, other.pw_name, other.pw_uid) + FIX
    assert os.path.islink(os.path.join(planted, "report.html"))
    assert sorted(os.listdir(planted)) == ["report.html", "run.json"]
    assert target.read_text() == "precious\n"
    # -o names a file of the caller's own: written there.
    mine = tmp_path / "mine.html"
    assert report(capsys, "--runs-dir", str(runs), RUN, "-o", str(mine))[:2] == (
        0, "%s\n" % mine)
    assert "tfmesos run %s" % RUN in mine.read_text()


def test_a_run_directory_in_a_runs_directory_others_may_write_gets_no_report(tmp_path, capsys):
    runs = tmp_path / "open"
    runs.mkdir()
    directory = write_run(runs, RUN)
    runs.chmod(0o777)          # anyone may swap the run directory for a link
    code, _, line = report(capsys, "--runs-dir", str(runs), RUN)
    assert code == 1
    assert line == ("tfmesos: error: the run directory %s lies in %s, which is writable by "
                    "others (mode 0777)" % (directory, runs) + FIX)
    assert os.listdir(directory) == ["run.json"]
    # A run directory others may write: refused alike.
    runs.chmod(0o755)
    os.chmod(directory, 0o777)
    code, _, line = report(capsys, str(directory))
    assert line == ("tfmesos: error: the run directory %s is writable by others (mode 0777)"
                    % directory + FIX)


def test_a_link_at_the_report_is_replaced_never_written_through(tmp_path, capsys):
    target = precious(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    directory = write_run(runs, RUN)
    report_html = os.path.join(directory, "report.html")
    os.symlink(target, report_html)
    assert report(capsys, "--runs-dir", str(runs), RUN)[:2] == (0, "%s\n" % report_html)
    assert not os.path.islink(report_html) and target.read_text() == "precious\n"
    assert sorted(os.listdir(directory)) == ["report.html", "run.json"]   # no temporary left
    assert os.stat(report_html).st_mode & 0o777 == 0o600
    # -o into a shared sticky directory (/tmp) where another user left a link.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    output = shared / "out.html"
    output.symlink_to(target)
    other = nobody("giving a link to another user needs root")
    os.lchown(output, other.pw_uid, other.pw_gid)
    assert report(capsys, str(directory), "-o", str(output))[:2] == (0, "%s\n" % output)
    assert not output.is_symlink() and output.stat().st_uid == os.geteuid()
    assert target.read_text() == "precious\n" and os.listdir(shared) == ["out.html"]


def test_a_device_fifo_or_link_to_one_is_never_replaced_by_the_report(tmp_path, capsys):
    # -o /dev/null as root replaced the device with the report (a regular
    # file); -o /dev/stdout replaced the link. (A FIFO and a link to a device
    # of the test's own: a regression must not take this machine's /dev/null.)
    runs = tmp_path / "runs"
    runs.mkdir(mode=0o700)
    write_run(runs, RUN)
    fifo, link = tmp_path / "fifo", tmp_path / "stdout"
    os.mkfifo(fifo)
    os.symlink("/dev/null", link)
    for path in (fifo, link):
        code, out, line = report(capsys, "--runs-dir", str(runs), RUN, "-o", str(path))
        assert (code, out) == (1, ""), line
        assert line == ("tfmesos: error: %s is not a regular file (a device, FIFO or directory, "
                        "or a link to one), which the report would replace: give the path of a "
                        "file (-o FILE)" % path)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.readlink(link) == "/dev/null"
