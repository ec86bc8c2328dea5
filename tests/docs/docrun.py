#!/usr/bin/python3
"""Runs the marked examples of Markdown files and checks what they print.

    docrun.py --root REPO --work DIR [--timeout SECONDS] FILE...

The markers, the sessions and what is not run are described in run.sh's
header (tests/docs/run.sh), which starts the servers this needs and calls
it. Standard library only. The environment must hold what the examples
use: PGHOST, PGPORT, PGUSER (a PostgreSQL with pg_fence installed),
FENCE_ENDPOINTS, PATH with fencectl, DOCTEST_PYTHON (the Python that runs
the python examples, with psycopg2).

Prints one line per block (PASS/FAIL file:line) and, last,
"N passed, N failed"; exits 1 if a block failed or a file is malformed.
"""

import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time

RUN_LANGS = {"sh", "sql", "python"}
# Fenced blocks with these info strings hold commands a reader may type:
# each must be marked to run or to be skipped.
CHECKED_INFO = {"sh", "bash", "shell", "console", "sql", "python", "py"}
MARKER = re.compile(r"^\s*<!--\s*doctest:\s*(.*?)\s*$")
FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
ERROR_COMMENT = re.compile(r"^--\s*ERROR[:\s]\s*([0-9A-Z]{5})\b")
VALUE_COMMENT = re.compile(r"^--\s*→\s*(.*?)\s*$")
MESSAGE_COMMENT = re.compile(r"^--\s*(ERROR:\s.*?)\s*$")


class DocError(Exception):
    """A malformed marker or block: the file cannot be run as marked."""


class Block:
    def __init__(self, path, line, lang, code, hidden):
        self.path, self.line, self.lang, self.code, self.hidden = path, line, lang, code, hidden
        self.output = None        # expected output lines, or None
        self.output_line = None

    def where(self):
        return f"{self.path}:{self.line}"

    def title(self):
        return f"{self.where()} {self.lang}{' (hidden)' if self.hidden else ''}"


# ---------------------------------------------------------------- parsing

def read_fence(lines, i):
    """The fenced block opening at lines[i]: (info, content lines, index after it)."""
    m = FENCE_OPEN.match(lines[i])
    indent, fence, info = len(m.group(1)), m.group(2), m.group(3).lower()
    close = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
    body = []
    j = i + 1
    while j < len(lines) and not close.match(lines[j]):
        line = lines[j]
        strip = min(indent, len(line) - len(line.lstrip(" ")))
        body.append(line[strip:])
        j += 1
    if j == len(lines):
        raise DocError(f"line {i + 1}: the fenced block is never closed")
    return info, body, j + 1


def next_nonblank(lines, i):
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


ALIASES = {"sh": {"sh", "bash", "shell"}, "sql": {"sql"}, "python": {"python", "py"}}


class Parser:
    """Walks a Markdown file: the blocks to run, in order (blocks), the number
    marked skip (skipped) and the tagged blocks left unmarked (unmarked)."""

    def __init__(self, path, text):
        self.path, self.lines = path, text.split("\n")
        self.blocks, self.skipped, self.unmarked = [], 0, []
        self.last_run = None   # the last sh/python block, while no other fence came after it

    def parse(self):
        i = 0
        while i < len(self.lines):
            m = MARKER.match(self.lines[i])
            if m and m.group(1).endswith("-->"):
                i = self.marked_fence(i, m.group(1)[:-3].strip())
            elif m:
                i = self.hidden(i, m.group(1).strip())
            elif FENCE_OPEN.match(self.lines[i]):
                info, _, after = read_fence(self.lines, i)
                if info in CHECKED_INFO:
                    self.unmarked.append(f"line {i + 1}: a ```{info} block that is neither run nor skipped "
                                         "(mark it 'doctest: sh|sql|python', or 'doctest: skip REASON')")
                self.last_run = None
                i = after
            else:
                i += 1
        if self.unmarked:
            raise DocError("\n".join(self.unmarked))
        return self.blocks, self.skipped

    def marked_fence(self, i, spec):
        """The marker at line i and the fenced block after it; the index after that."""
        words = spec.split(None, 1)
        kind = words[0] if words else ""
        j = next_nonblank(self.lines, i + 1)
        if j == len(self.lines) or not FENCE_OPEN.match(self.lines[j]):
            raise DocError(f"line {i + 1}: 'doctest: {kind}' is not followed by a fenced block")
        info, body, after = read_fence(self.lines, j)
        if kind in RUN_LANGS:
            if len(words) > 1 or (info and info not in ALIASES[kind]):
                raise DocError(f"line {i + 1}: 'doctest: {kind}' takes no arguments and marks a "
                               f"```{kind} block, not 'doctest: {spec}' before ```{info}")
            self.blocks.append(Block(self.path, j + 1, kind, "\n".join(body) + "\n", False))
            self.last_run = self.blocks[-1] if kind != "sql" else None
        elif kind == "output":
            if self.last_run is None or self.last_run.output is not None:
                raise DocError(f"line {i + 1}: 'doctest: output' does not follow a sh or python "
                               "block (with no other fenced block in between)")
            self.last_run.output, self.last_run.output_line = body, j + 1
            self.last_run = None
        elif kind == "skip":
            if len(words) < 2:
                raise DocError(f"line {i + 1}: 'doctest: skip' needs a reason")
            self.skipped += 1
            self.last_run = None
        else:
            raise DocError(f"line {i + 1}: unknown marker 'doctest: {kind}' (sh, sql, python, output, skip)")
        return after

    def hidden(self, i, kind):
        """A hidden block: the marker's lines up to "-->" are the code."""
        if kind not in RUN_LANGS:
            raise DocError(f"line {i + 1}: a hidden block is 'doctest: sh', 'sql' or 'python', not '{kind}'")
        j = i + 1
        while j < len(self.lines) and self.lines[j].strip() != "-->":
            j += 1
        if j == len(self.lines):
            raise DocError(f"line {i + 1}: the hidden block has no closing '-->' line")
        code = textwrap.dedent("\n".join(self.lines[i + 1:j]) + "\n")
        self.blocks.append(Block(self.path, i + 1, kind, code, True))
        self.last_run = None
        return j + 1


# ---------------------------------------------------------------- output matching

def line_pattern(expected):
    """A regex for one expected line: '...' matches any text."""
    return re.compile("^" + ".*".join(re.escape(part) for part in expected.split("...")) + "$")


def output_matches(expected, actual):
    """expected, actual: lists of lines (trailing spaces and blank lines at the
    end ignored). A line that is only '...' matches any number of lines."""
    exp = [e.rstrip() for e in expected]
    act = [a.rstrip() for a in actual]
    while exp and not exp[-1]:
        exp.pop()
    while act and not act[-1]:
        act.pop()

    def match(ei, ai):
        if ei == len(exp):
            return ai == len(act)
        if exp[ei].strip() == "...":
            return any(match(ei + 1, k) for k in range(ai, len(act) + 1))
        return ai < len(act) and line_pattern(exp[ei]).match(act[ai]) is not None and match(ei + 1, ai + 1)

    return match(0, 0)


# ---------------------------------------------------------------- SQL

SQL_TOKEN = re.compile(r"""--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|"(?:[^"]|"")*"|"""
                       r"""\$([A-Za-z_]\w*|)\$.*?\$\1\$|;|\n|[^-/'"$;\n]+|.""", re.S)


class Statement:
    def __init__(self, line):
        self.line = line          # of the block, 1-based
        self.text = ""
        self.comment = ""         # the -- comment after its ';' on the same line
        self.after = []           # comment lines between it and the next statement


def split_sql(code):
    """The statements of a SQL block. A statement ends at a ';' outside
    quotes, dollar quotes and comments (psql's backslash commands are not
    supported)."""
    stmts, cur, line, ended_on = [], None, 1, None
    for m in SQL_TOKEN.finditer(code):
        tok = m.group(0)
        if tok == "\n":
            line += 1
            if cur is not None:
                cur.text += tok
        elif tok.startswith("--") and cur is None:
            if stmts and ended_on == line and not stmts[-1].comment:
                stmts[-1].comment = tok.strip()
            elif stmts:
                stmts[-1].after.append(tok.strip())
        elif tok == ";" and cur is not None:
            cur.text = (cur.text + ";").strip()
            stmts.append(cur)
            cur, ended_on = None, line
        elif cur is None and tok.isspace():
            continue
        else:
            if cur is None:
                cur = Statement(line)
            cur.text += tok
            line += tok.count("\n")
    if cur is not None and cur.text.strip():
        raise DocError(f"the SQL block ends inside a statement that starts at its line {cur.line} (no ';')")
    return stmts


def statement_problems(st, state, out, err):
    """What differs between a statement's result (SQLSTATE, what it printed,
    its stderr) and what its comments say."""
    problems = []
    m = ERROR_COMMENT.match(st.comment)
    want_state = m.group(1) if m else "00000"
    if state != want_state:
        problems.append(f"SQLSTATE {state}, expected {want_state}")
    m = VALUE_COMMENT.match(st.comment)
    if m and not output_matches([m.group(1)], out.split("\n")):
        problems.append(f"printed {out!r}, expected {m.group(1)!r}")
    for c in st.after:
        m = MESSAGE_COMMENT.match(c)
        if m and " ".join(m.group(1).split()) not in " ".join(err.split()):
            problems.append(f"no error {m.group(1)!r}")
    return problems


def run_sql(block, env, work, timeout):
    """One psql per block. Returns (ok, report lines)."""
    try:
        stmts = split_sql(block.code)
    except DocError as e:
        return False, [str(e)]
    script = []
    for st in stmts:
        script.append(st.text)
        script.append("\\echo @@doctest :SQLSTATE")
        script.append("\\warn @@doctest")
    path = os.path.join(work, f"block-{block.line}.sql")
    with open(path, "w") as f:
        f.write("\n".join(script) + "\n")
    try:
        p = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=0", "-f", path],
                           env=env, cwd=work, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, [f"psql did not finish within {timeout}s"]
    outs = p.stdout.split("\n")
    errs = p.stderr.split("@@doctest\n")
    results, chunk = [], []
    for line in outs:
        m = re.match(r"^@@doctest (\S*)$", line)
        if m:
            results.append((m.group(1), "\n".join(chunk)))
            chunk = []
        else:
            chunk.append(line)
    if len(results) != len(stmts):
        return False, [f"psql ran {len(results)} of the block's {len(stmts)} statements (exit {p.returncode})",
                       *("  " + e for e in p.stderr.splitlines())]
    ok, report = True, []
    for k, (st, (state, out)) in enumerate(zip(stmts, results)):
        err = errs[k] if k < len(errs) else ""
        problems = statement_problems(st, state, out, err)
        if problems:
            ok = False
            report.append(f"statement at line {block.line + st.line}: {st.text.split(chr(10))[0][:70]}")
            report.extend("  " + p for p in problems)
            report.extend("  stderr: " + e for e in err.strip().splitlines())
    return ok, report


# ---------------------------------------------------------------- sessions

def read_line(fd, timeout, buf):
    """A line from fd within timeout; None on EOF; raises TimeoutError."""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf[0]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        data = os.read(fd, 65536)
        if not data:
            return None
        buf[0] += data
    line, _, buf[0] = buf[0].partition(b"\n")
    return line.decode()


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class Interpreter:
    """What both sessions share: a child interpreter fed on its stdin."""

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """Ends the interpreter: end of input, then a kill if it lingers."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                kill_group(self.proc)


class ShellSession(Interpreter):
    """One bash per file: variables, functions and the directory carry from
    block to block. A block stops at its first failing command (an ERR trap
    that returns from the sourced block, which also covers functions and
    command substitutions, as set -e with inherit_errexit would)."""

    INIT = ("set -E\n"
            "trap '__doctest_status=$?; [[ -n ${BASH_SOURCE[0]:-} ]] && return $__doctest_status' ERR\n")

    def __init__(self, env, cwd, work):
        self.work, self.buf = work, [b""]
        self.log = open(os.path.join(work, "shell.log"), "ab")
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=cwd,
                                     start_new_session=True)
        self.proc.stdin.write(self.INIT.encode())
        self.proc.stdin.flush()

    def run(self, block, timeout, env):
        code_path = os.path.join(self.work, f"block-{block.line}.sh")
        out_path = os.path.join(self.work, f"block-{block.line}.out")
        self.env_path = os.path.join(self.work, f"block-{block.line}.env")
        with open(code_path, "w") as f:
            f.write(block.code)
        cmd = (f"source '{code_path}' >'{out_path}' 2>&1 </dev/null; "
               f"echo \"@@doctest $?\"; env -0 >'{self.env_path}'\n")
        try:
            self.proc.stdin.write(cmd.encode())
            self.proc.stdin.flush()
            line = read_line(self.proc.stdout.fileno(), timeout, self.buf)
        except TimeoutError:
            kill_group(self.proc)
            return False, read_text(out_path), [f"no end within {timeout}s (the session was killed)"]
        except BrokenPipeError:
            line = None
        output = read_text(out_path)
        if line is None:
            rc = self.proc.wait()
            return False, output, [f"the block ended its shell (exit {rc}); later sh blocks start a new one"]
        m = re.match(r"^@@doctest (\d+)$", line)
        if not m:
            return False, output, [f"the shell said {line!r}"]
        self.exported(env)
        status = int(m.group(1))
        return status == 0, output, ([] if status == 0 else [f"a command failed with status {status}"])

    def exported(self, env):
        """env := the variables the shell exports now (written after the
        block's end marker: waits for the file, which env -0 ends with a NUL)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            data = read_text(self.env_path)
            if data.endswith("\0"):
                env.clear()
                env.update(item.split("=", 1) for item in data.split("\0") if "=" in item)
                return
            time.sleep(0.01)

    def close(self):
        self.stop()
        self.log.close()


PY_DRIVER = r'''
import contextlib, io, json, os, sys, traceback
reply = os.fdopen(int(sys.argv[1]), "w")
ns = {"__name__": "__main__"}
while True:
    request = sys.stdin.readline()
    if not request:
        break
    req = json.loads(request)
    os.environ.clear()
    os.environ.update(req["env"])
    out = io.StringIO()
    ok, error = True, ""
    with open(req["path"]) as f:
        code = f.read()
    try:
        # Padded so that tracebacks give the doc's own line numbers.
        code = "\n" * req["line"] + code
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(compile(code, req["file"], "exec"), ns)
    except BaseException as e:
        ok, error = False, "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
    reply.write(json.dumps({"ok": ok, "output": out.getvalue(), "error": error}) + "\n")
    reply.flush()
'''


class PythonSession(Interpreter):
    """One Python interpreter per file: every block runs in the same globals."""

    def __init__(self, env, cwd, work):
        self.work, self.buf = work, [b""]
        driver = os.path.join(work, "driver.py")
        with open(driver, "w") as f:
            f.write(PY_DRIVER)
        r, w = os.pipe()
        self.log = open(os.path.join(work, "python.log"), "ab")
        python = env.get("DOCTEST_PYTHON", "/usr/bin/python3")
        self.proc = subprocess.Popen([python, "-u", driver, str(w)], stdin=subprocess.PIPE, stdout=self.log,
                                     stderr=self.log, env=env, cwd=cwd, pass_fds=(w,), start_new_session=True)
        os.close(w)
        self.reply = r

    def run(self, block, timeout, env):
        code_path = os.path.join(self.work, f"block-{block.line}.py")
        with open(code_path, "w") as f:
            f.write(block.code)
        req = json.dumps({"path": code_path, "file": block.path, "line": block.line, "env": env}) + "\n"
        try:
            self.proc.stdin.write(req.encode())
            self.proc.stdin.flush()
            line = read_line(self.reply, timeout, self.buf)
        except TimeoutError:
            kill_group(self.proc)
            return False, "", [f"no end within {timeout}s (the session was killed)"]
        except BrokenPipeError:
            line = None
        if line is None:
            return False, "", [f"the interpreter ended (exit {self.proc.wait()}); see {self.work}/python.log"]
        ans = json.loads(line)
        return ans["ok"], ans["output"], ([] if ans["ok"] else ans["error"].rstrip().split("\n"))

    def close(self):
        self.stop()
        os.close(self.reply)
        self.log.close()


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


# ---------------------------------------------------------------- per file

def slug(path):
    return re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_")


def shadow_root(root, dest, fencectl_build):
    """A directory that looks like the repository's top (a symlink per entry),
    with scripts/cluster.sh replaced by tests/docs/cluster.sh, and build/ the
    build tree whose fencectl is tested. Examples run here, so files they make
    stay out of the checkout."""
    os.makedirs(dest)
    for name in os.listdir(root):
        if name in (".git", "scripts", "build"):
            continue
        os.symlink(os.path.join(root, name), os.path.join(dest, name))
    scripts = os.path.join(dest, "scripts")
    os.makedirs(scripts)
    for name in os.listdir(os.path.join(root, "scripts")):
        target = os.path.join(root, "tests", "docs", "cluster.sh") if name == "cluster.sh" \
            else os.path.join(root, "scripts", name)
        os.symlink(target, os.path.join(scripts, name))
    build = fencectl_build or os.path.join(root, "build")
    os.symlink(build, os.path.join(dest, "build"))


def make_database(name, env):
    admin = dict(env, PGDATABASE="postgres")
    for sql in (f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql], env=admin, check=True,
                       capture_output=True, text=True)


def stop_clusters(root, under):
    for dirpath, _, files in os.walk(under):
        if "cluster.env" in files:
            subprocess.run(["bash", os.path.join(root, "scripts", "cluster.sh"), "stop", dirpath],
                           capture_output=True)


def report(ok, block, output, notes):
    print(f"{'PASS' if ok else 'FAIL'} {block.title()}", flush=True)
    if ok:
        return
    for n in notes:
        print(f"    {n}")
    if output.strip():
        print("    it printed:")
        for line in output.rstrip().split("\n")[-40:]:
            print(f"    | {line}")
    if block.output is not None:
        print(f"    expected ({block.path}:{block.output_line}):")
        for line in block.output:
            print(f"    | {line}")
    sys.stdout.flush()


def run_file(path, args, env0, counts):
    with open(os.path.join(args.root, path)) as f:
        text = f.read()
    try:
        blocks, skipped = Parser(path, text).parse()
    except DocError as e:
        for problem in str(e).split("\n"):
            print(f"FAIL {path}: {problem}", flush=True)
            counts["failed"] += 1
        return
    counts["skipped"] += skipped
    if not blocks:
        return
    name = slug(path)
    work = os.path.join(args.work, name)
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp)
    cwd = os.path.join(work, "repo")
    shadow_root(args.root, cwd, args.fencectl_build)
    env = dict(env0, PGDATABASE=f"doctest_{name}", TMPDIR=tmp, DOCTEST_TMP=tmp)
    if path == "README.md" and env.get("DOCTEST_BIN"):
        # A newcomer's shell has no fencectl: the quick start must find it.
        env["PATH"] = os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if d != env["DOCTEST_BIN"])
    make_database(env["PGDATABASE"], env)
    sessions = {}
    try:
        for block in blocks:
            if block.lang == "sql":
                ok, notes = run_sql(block, env, work, args.timeout)
                report(ok, block, "", notes)
            else:
                s = sessions.get(block.lang)
                if s is None or not s.alive():
                    s = (ShellSession if block.lang == "sh" else PythonSession)(env, cwd, work)
                    sessions[block.lang] = s
                ok, output, notes = s.run(block, args.timeout, env)
                if ok and block.output is not None and not output_matches(block.output, output.split("\n")):
                    ok, notes = False, ["the output differs from the expected output"]
                report(ok, block, output, notes)
            counts["passed" if ok else "failed"] += 1
    finally:
        for s in sessions.values():
            s.close()
        stop_clusters(args.root, tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True, help="the repository")
    ap.add_argument("--work", required=True, help="an empty directory for the run")
    ap.add_argument("--timeout", type=int, default=60, help="seconds a block may take (default 60)")
    ap.add_argument("--fencectl-build", default="", help="the build tree the examples' build/ stands for")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    env = dict(os.environ)
    env.pop("FENCE_BASE_PORT", None)
    for path in args.files:
        run_file(path, args, env, counts)
    print(f"({counts['skipped']} blocks marked skip, not run)")
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
