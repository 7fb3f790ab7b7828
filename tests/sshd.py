"""A real OpenSSH server on 127.0.0.1 for the board tests: throwaway keys, keys only, stopped at the end.

Debian's ``openssh-server`` (``.ci/run`` installs it), with no SFTP subsystem, as
Dropbear-based and minimal board images: the build needs none. The server runs as the
user running the tests and lets in only that user, with the key it makes. The
ssh configuration it writes names one ``Host`` per way of reaching it, faults included.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


def sshd_binary() -> str | None:
    return next((path for path in (shutil.which("sshd"), *SSHD_CANDIDATES) if path and os.access(path, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def keygen(path: Path) -> str:
    """A new ed25519 key pair at ``path``; its public line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


@dataclasses.dataclass
class SshServer:
    """The running server, and the ssh configuration that reaches it (``ssh_config``)."""

    root: Path
    port: int
    user: str
    process: subprocess.Popen
    ssh_config: Path
    known_hosts: Path
    user_key: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    @property
    def log(self) -> str:
        return (self.root / "sshd.log").read_text(errors="replace")


def start(root: Path) -> SshServer:
    sshd = sshd_binary()
    root.mkdir(parents=True, exist_ok=True)
    user, port = getpass.getuser(), free_port()
    host_public = keygen(root / "host_key")
    keygen(root / "impostor_host_key")
    (root / "authorized_keys").write_text(keygen(root / "user_key") + "\n")
    keygen(root / "stranger_key")  # a key the server does not know
    for name in ("authorized_keys", "user_key", "stranger_key"):
        (root / name).chmod(0o600)
    (root / "sshd_config").write_text(
        f"""ListenAddress 127.0.0.1
Port {port}
HostKey {root / "host_key"}
PidFile {root / "sshd.pid"}
AuthorizedKeysFile {root / "authorized_keys"}
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
MaxStartups 50
"""
    )
    if os.geteuid() == 0:
        # Run as root, sshd needs its privilege separation folder (the service makes it at boot).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    process = subprocess.Popen([sshd, "-D", "-f", str(root / "sshd_config"), "-E", str(root / "sshd.log")], stdin=subprocess.DEVNULL)
    known_hosts = root / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_public}\n")
    impostor = " ".join((root / "impostor_host_key.pub").read_text().split()[:2])
    (root / "impostor_known_hosts").write_text(f"[127.0.0.1]:{port} {impostor}\n")
    common = f"  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentitiesOnly yes\n  GlobalKnownHostsFile /dev/null\n"
    hosts = {
        "board": f"  IdentityFile {root / 'user_key'}\n  UserKnownHostsFile {known_hosts}\n",
        "board2": f"  IdentityFile {root / 'user_key'}\n  UserKnownHostsFile {known_hosts}\n",
        "stranger": f"  IdentityFile {root / 'stranger_key'}\n  UserKnownHostsFile {known_hosts}\n",
        "impostor": f"  IdentityFile {root / 'user_key'}\n  UserKnownHostsFile {root / 'impostor_known_hosts'}\n",
        "unknown": f"  IdentityFile {root / 'user_key'}\n  UserKnownHostsFile {root / 'empty_known_hosts'}\n",
    }
    (root / "empty_known_hosts").write_text("")
    config = "".join(f"Host {name}\n{common}{extra}" for name, extra in hosts.items())
    # A closed port on the same address: nothing listens there.
    config += f"Host closed\n  HostName 127.0.0.1\n  Port {free_port()}\n  User {user}\n  IdentityFile {root / 'user_key'}\n"
    # The address itself (ssh://USER@127.0.0.1:PORT): the server's key and the user's key, nothing else.
    config += f"Host 127.0.0.1\n  IdentityFile {root / 'user_key'}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
    (root / "ssh_config").write_text(config)
    server = SshServer(root, port, user, process, root / "ssh_config", known_hosts, root / "user_key")
    deadline = time.monotonic() + 20
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited ({process.returncode}): {server.log}")
        done = subprocess.run(["ssh", "-F", str(server.ssh_config), "-o", "BatchMode=yes", "board", "true"], capture_output=True, text=True)
        if done.returncode == 0:
            return server
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"sshd on port {port} does not let the test key in: {done.stderr.strip()} / {server.log}")
        time.sleep(0.2)
