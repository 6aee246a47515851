"""Fresh Jupyter kernels for the price of one import of torch and transformers.

A kernel started the usual way (`python -m ipykernel_launcher`) imports IPython, torch
and the Hugging Face modules a chapter compares against before it runs its first line:
seconds per kernel, more than most chapters take to run. Here one server process imports
those third-party modules once (and nothing of `literate`), then forks one child per
kernel; the child is that process as it was after the imports, and becomes an ordinary
ipykernel on the connection file Jupyter gave it, in the working directory and with the
environment Jupyter asked for. Jupyter's side is unchanged: the kernel spec's command is
a small stub (this file, `kernel` mode) that hands its connection file, standard streams,
working directory and environment to the server, relays the signals Jupyter sends it to
the kernel, and exits with the kernel's exit code.

    python -I warm_kernels.py serve SOCKET [MODULE or MODULE:NAME ...]
    python -I warm_kernels.py kernel SOCKET -f CONNECTION_FILE [ipykernel options]

The file imports only the standard library at the top, so the stub starts in
milliseconds; run by its path, it imports nothing of `literate` into the server.
`WarmKernels` (for the tests) starts a server and makes kernel managers that use it;
`third_party_imports` lists what a set of sources imports from the preloadable libraries.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

PRELOADABLE = ("torch", "transformers", "numpy")
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)


# ---------------------------------------------------------------------------------------
# The server (one process, one thread: it forks)


def _preload(specs: list[str]) -> None:
    import importlib

    for spec in specs:
        module, _, name = spec.partition(":")
        try:
            imported = importlib.import_module(module)
            if name:
                getattr(imported, name)
        except Exception:  # the kernel meets the same error where its code imports it
            pass


def _child(
    conn: socket.socket, listener: socket.socket, fds: list[int], request: dict
) -> None:
    """In the forked child: become an ipykernel with the stub's streams, cwd and env."""
    listener.close()
    conn.close()
    os.setsid()  # its own session: a signal to the server's group does not reach it
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = list(request["argv"])
    if os.environ.get(
        "JPY_PARENT_PID"
    ):  # read when ipykernel was imported, before the fork
        argv.append(f"--IPKernelApp.parent_handle={os.environ['JPY_PARENT_PID']}")
    sys.argv = ["ipykernel_launcher", *argv]
    code = 0
    try:
        from ipykernel import kernelapp

        kernelapp.launch_new_instance(argv=argv)
    except SystemExit as stop:
        code = (
            stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        )
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 16)
        if not more:
            raise ConnectionError("the stub closed the connection mid-request")
        data += more
    return json.loads(data), list(fds)


def serve(path: str, preload: list[str]) -> None:
    """Import `preload`, listen on the UNIX socket `path`, fork a kernel per request.
    Exits, killing its kernels, when its standard input closes or on SIGTERM."""
    import selectors

    _preload(["ipykernel.kernelapp", *preload])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    children: dict[int, socket.socket] = {}
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)
    print("ready", flush=True)
    try:
        while not stopping:
            for key, _ in selector.select(timeout=0.05):
                if key.fileobj is sys.stdin:
                    if not sys.stdin.readline():
                        stopping = True
                    continue
                conn, _ = listener.accept()
                try:
                    request, fds = _read_request(conn)
                except (ConnectionError, ValueError, OSError):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    _child(conn, listener, fds, request)
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"{pid}\n".encode())
                children[pid] = conn
            while children:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                conn = children.pop(pid, None)
                if conn is not None:
                    try:
                        conn.sendall(
                            f"exit {os.waitstatus_to_exitcode(status)}\n".encode()
                        )
                    except OSError:
                        pass
                    conn.close()
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        listener.close()
        os.unlink(path)


# ---------------------------------------------------------------------------------------
# The stub (what Jupyter starts as "the kernel")


def stub(path: str, argv: list[str]) -> int:
    """Ask the server at `path` for a kernel with `argv`; relay signals; its exit code."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
    reader = conn.makefile("r", encoding="utf-8")
    pid = int(reader.readline())

    def relay(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in RELAYED:
        signal.signal(sig, relay)
    while True:
        try:
            line = reader.readline()
        except InterruptedError:
            continue
        if line.startswith("exit "):
            return int(line.split()[1])
        if not line:  # the server went away: so did the kernel
            return 1


# ---------------------------------------------------------------------------------------
# The client side (imported by the tests)


def third_party_imports(
    sources: list[str], libraries: tuple[str, ...] = PRELOADABLE
) -> list[str]:
    """`MODULE` and `MODULE:NAME` for every import of `libraries` in `sources` (Python
    source texts; nested imports too), sorted."""
    import ast

    found: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {
                    a.name for a in node.names if a.name.split(".")[0] in libraries
                }
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module.split(".")[0] in libraries:
                    found.add(node.module)
                    found |= {
                        f"{node.module}:{a.name}" for a in node.names if a.name != "*"
                    }
    return sorted(found)


class WarmKernels:
    """A running server and a kernel spec whose kernels it forks.

    `manager()` gives a fresh `AsyncKernelManager` for one kernel (nbclient's `km=`).
    The server's environment is `env`; each kernel gets the environment and working
    directory its manager starts it with."""

    NAME = "literate-warm-python3"

    def __init__(
        self, folder: str, preload: list[str], env: dict[str, str] | None = None
    ) -> None:
        import subprocess
        import tempfile

        # a UNIX socket's path has at most about 100 characters: not under `folder`
        self.socket_dir = tempfile.mkdtemp(prefix="kernels-")
        self.socket = os.path.join(self.socket_dir, "server.sock")
        spec_dir = os.path.join(folder, "kernels", self.NAME)
        os.makedirs(spec_dir, exist_ok=True)
        with open(os.path.join(spec_dir, "kernel.json"), "w", encoding="utf-8") as f:
            json.dump(
                {
                    "argv": [
                        sys.executable,
                        "-I",
                        os.path.abspath(__file__),
                        "kernel",
                        self.socket,
                        "-f",
                        "{connection_file}",
                    ],
                    "display_name": "Python 3 (forked)",
                    "language": "python",
                    "interrupt_mode": "signal",
                },
                f,
            )
        self.kernel_dirs = [os.path.join(folder, "kernels")]
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                os.path.abspath(__file__),
                "serve",
                self.socket,
                *preload,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            cwd=folder,
        )
        ready = self.process.stdout.readline()
        if ready.strip() != "ready":
            self.close()
            raise RuntimeError(f"the kernel server did not start (said {ready!r})")

    def manager(self):
        from jupyter_client import AsyncKernelManager
        from jupyter_client.kernelspec import KernelSpecManager

        specs = KernelSpecManager(
            kernel_dirs=self.kernel_dirs, ensure_native_kernel=False
        )
        return AsyncKernelManager(kernel_name=self.NAME, kernel_spec_manager=specs)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except Exception:
                self.process.terminate()
                self.process.wait(timeout=10)
        self.process.stdout.close()
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        os.rmdir(self.socket_dir)


if __name__ == "__main__":
    mode, path, *rest = sys.argv[1:]
    if mode == "serve":
        serve(path, rest)
    elif mode == "kernel":
        raise SystemExit(stub(path, rest))
    else:
        raise SystemExit(f"unknown mode {mode!r}: expected 'serve' or 'kernel'")
