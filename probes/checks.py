"""Node checks: each one pass / warn / fail / skipped (tool absent) with the evidence that decided it.

Stdlib only; external tools run as argument lists with a timeout. A check never raises: an unexpected
problem becomes a `skipped` or `warn` with the error as evidence.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import resource
import shutil
import socket
import struct
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from probes.result import Check

TOOL_TIMEOUT_S = 10.0
# Interfaces that exist on a host but cannot carry traffic between hosts (or only through an overlay
# that is not the training fabric): a collective bound to one of them cannot reach the peers.
SHADOW_PREFIXES = ("docker", "virbr", "tailscale", "lo", "br-", "veth", "cni", "flannel", "podman", "zt")
SIOCGIFADDR = 0x8915
IFF_UP = 0x1
SHM_FAIL_BYTES = 256 << 20
SHM_WARN_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class Interface:
    name: str
    up: bool
    ipv4: str | None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    returncode: int
    stdout: str
    stderr: str


def run_tool(argv: list[str], timeout: float = TOOL_TIMEOUT_S) -> ToolOutput | None:
    """Run a diagnostic tool; None when it is not installed. A timeout is reported as rc 124."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return ToolOutput(124, "", f"{argv[0]} timed out after {timeout:g} s")
    except OSError as error:
        return ToolOutput(126, "", str(error))
    return ToolOutput(done.returncode, done.stdout, done.stderr)


def _ipv4_of(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def list_interfaces(sys_net: Path = Path("/sys/class/net")) -> list[Interface]:
    interfaces = []
    for entry in sorted(sys_net.iterdir()) if sys_net.is_dir() else []:
        try:
            flags = int((entry / "flags").read_text().strip(), 16)
        except (OSError, ValueError):
            continue
        # The administrative state (IFF_UP), not the carrier: a bridge without ports (docker0 with no
        # containers) has no carrier, yet NCCL and Gloo still bind its address.
        interfaces.append(Interface(entry.name, bool(flags & IFF_UP), _ipv4_of(entry.name)))
    return interfaces


def is_shadow(name: str) -> bool:
    return name.startswith(SHADOW_PREFIXES)


def _select(spec: str, interfaces: list[Interface]) -> list[Interface]:
    """Interfaces an NCCL/Gloo `*_SOCKET_IFNAME` value selects (prefix list, `^` excludes, `=` exact)."""
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    names = [n for n in spec.lstrip("=").split(",") if n]

    def hit(iface: Interface) -> bool:
        return any(iface.name == n if exact else iface.name.startswith(n) for n in names)

    return [i for i in interfaces if i.up and i.ipv4 and hit(i) != exclude]


def nccl_choice(interfaces: list[Interface], env: Mapping[str, str]) -> list[Interface]:
    """Interfaces NCCL's socket transport would use: NCCL_SOCKET_IFNAME, else ib*, else not docker/lo."""
    spec = env.get("NCCL_SOCKET_IFNAME")
    if spec:
        return _select(spec, interfaces)
    return _select("ib", interfaces) or _select("^docker,lo", interfaces)


def gloo_choice(interfaces: list[Interface], env: Mapping[str, str], hostname: str) -> list[Interface]:
    """Interface Gloo would bind: GLOO_SOCKET_IFNAME, else the one holding the hostname's address."""
    spec = env.get("GLOO_SOCKET_IFNAME")
    if spec:
        return [i for i in interfaces if i.name in spec.split(",") and i.up and i.ipv4]
    try:
        address = socket.gethostbyname(hostname)
    except OSError:
        return []
    if ipaddress.ip_address(address).is_loopback:
        return [Interface("lo", True, address)]
    return [i for i in interfaces if i.ipv4 == address]


def check_interfaces(
    env: Mapping[str, str], *, multi_host: bool, interfaces: list[Interface] | None = None
) -> Check:
    interfaces = list_interfaces() if interfaces is None else interfaces
    hostname = socket.gethostname()
    listing = ", ".join(f"{i.name}={i.ipv4 or '-'}{'' if i.up else '(down)'}" for i in interfaces)
    nccl = nccl_choice(interfaces, env)
    gloo = gloo_choice(interfaces, env, hostname)
    picks = (
        f"NCCL would use {','.join(i.name for i in nccl) or 'nothing'}; "
        f"Gloo would use {','.join(i.name for i in gloo) or 'nothing'}"
    )
    evidence = f"{picks}; interfaces: {listing}"
    problems: list[str] = []
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        spec = env.get(var)
        if not spec:
            continue
        chosen = nccl if var.startswith("NCCL") else gloo
        if not chosen:
            problems.append(f"{var}={spec} matches no interface that is up with an address")
        shadows = [i.name for i in chosen if is_shadow(i.name)]
        if shadows and multi_host:
            problems.append(
                f"interface shadowing: {var}={spec} selects {','.join(shadows)}, a local bridge/loopback"
                " that cannot reach other hosts"
            )
    if not env.get("GLOO_SOCKET_IFNAME") and multi_host and gloo and is_shadow(gloo[0].name):
        problems.append(
            f"interface shadowing: hostname {hostname} resolves to {gloo[0].ipv4} ({gloo[0].name}),"
            " so Gloo binds an address other hosts cannot reach; set GLOO_SOCKET_IFNAME"
        )
    if problems:
        return Check("interfaces", "fail", "; ".join(problems) + f" ({evidence})")
    virtual = [i.name for i in interfaces if i.up and i.ipv4 and i.name.startswith(("virbr", "tailscale"))]
    if virtual and not env.get("NCCL_SOCKET_IFNAME"):
        return Check(
            "interfaces",
            "warn",
            f"{','.join(virtual)} present and NCCL_SOCKET_IFNAME unset: NCCL may pick it ({evidence})",
        )
    return Check("interfaces", "pass", evidence)


def check_shm(path: str = "/dev/shm") -> Check:
    try:
        stat = os.statvfs(path)
    except OSError as error:
        return Check("shm", "skipped", f"{path}: {error}")
    size = stat.f_blocks * stat.f_frsize
    evidence = f"{path} is {size / (1 << 20):.0f} MiB"
    if size < SHM_FAIL_BYTES:
        return Check("shm", "fail", evidence + " (NCCL needs more; containers default to 64 MiB: --shm-size)")
    if size < SHM_WARN_BYTES:
        return Check("shm", "warn", evidence + " (under 1 GiB)")
    return Check("shm", "pass", evidence)


def check_memlock(rdma_present: bool) -> Check:
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    shown = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft // 1024} KiB"
    evidence = f"ulimit -l is {shown}"
    if soft == resource.RLIM_INFINITY:
        return Check("memlock", "pass", evidence)
    if rdma_present:
        return Check("memlock", "fail", evidence + "; RDMA devices present and need it unlimited")
    return Check("memlock", "pass", evidence + "; no RDMA devices, so not needed")


def check_gpus(expected: int | None) -> Check:
    out = run_tool(
        [
            "nvidia-smi",
            "--query-gpu=index,name,pci.bus_id,ecc.errors.uncorrected.volatile.total",
            "--format=csv,noheader",
        ]
    )
    if out is None:
        return Check("gpus", "skipped", "nvidia-smi not installed")
    if out.returncode != 0:
        return Check("gpus", "fail", f"nvidia-smi exited {out.returncode}: {out.stderr.strip()[:300]}")
    rows = [[c.strip() for c in line.split(",")] for line in out.stdout.strip().splitlines() if line.strip()]
    ecc = [r for r in rows if len(r) > 3 and r[3].isdigit() and int(r[3]) > 0]
    evidence = f"{len(rows)} GPUs: " + "; ".join(" ".join(r[:3]) for r in rows)
    if ecc:
        return Check(
            "gpus", "fail", "uncorrected ECC errors: " + "; ".join(f"GPU {r[0]}: {r[3]}" for r in ecc)
        )
    if expected is not None and len(rows) < expected:
        return Check("gpus", "fail", f"expected {expected} GPUs, found {evidence}")
    return Check("gpus", "pass", evidence)


XID_LINE = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def check_xid() -> Check:
    out = run_tool(["dmesg", "--kernel", "--nopager"])
    if out is None:
        return Check("xid", "skipped", "dmesg not installed")
    if out.returncode != 0:
        return Check("xid", "skipped", f"kernel log not readable: {out.stderr.strip()[:200]}")
    hits = [line.strip() for line in out.stdout.splitlines() if XID_LINE.search(line)]
    if hits:
        codes = sorted({m.group(2) for line in hits if (m := XID_LINE.search(line))})
        return Check(
            "xid", "fail", f"{len(hits)} Xid events (codes {', '.join(codes)}); last: {hits[-1][:300]}"
        )
    return Check("xid", "pass", "no NVRM Xid lines in the kernel log")


def check_topology() -> Check:
    out = run_tool(["nvidia-smi", "topo", "-m"])
    if out is None:
        return Check("topology", "skipped", "nvidia-smi not installed")
    if out.returncode != 0:
        return Check(
            "topology", "warn", f"nvidia-smi topo exited {out.returncode}: {out.stderr.strip()[:200]}"
        )
    gpu_rows = [line for line in out.stdout.splitlines() if line.startswith("GPU")]
    matrix = " | ".join(re.sub(r"\s+", " ", row).strip() for row in gpu_rows)[:600]
    # Between GPUs, SYS/NODE paths mean no NVLink and traffic crosses the CPU interconnect.
    if any(re.search(r"\b(SYS)\b", row) for row in gpu_rows) and any("NV" in row for row in gpu_rows):
        return Check("topology", "warn", f"some GPU pairs connect only through SYS: {matrix}")
    return Check("topology", "pass", matrix or "no GPU rows")


def check_acs() -> Check:
    out = run_tool(["lspci", "-vvv"])
    if out is None:
        return Check("acs", "skipped", "lspci not installed")
    if out.returncode != 0:
        return Check("acs", "skipped", f"lspci exited {out.returncode}")
    enabled = [line.strip() for line in out.stdout.splitlines() if "ACSCtl:" in line and "SrcValid+" in line]
    if enabled:
        return Check(
            "acs", "warn", f"ACS enabled on {len(enabled)} PCIe bridges (blocks GPU P2P): {enabled[0]}"
        )
    return Check("acs", "pass", "no PCIe bridge with ACS source validation enabled")


def check_fabric_manager() -> Check:
    out = run_tool(["nvidia-smi", "-q"])
    if out is None:
        return Check("fabric-manager", "skipped", "nvidia-smi not installed")
    states = re.findall(r"^\s*State\s*:\s*(.+)$", out.stdout.split("Fabric", 1)[-1], re.MULTILINE)
    if "Fabric" not in out.stdout or not states:
        return Check("fabric-manager", "skipped", "no NVSwitch fabric reported")
    state = states[0].strip()
    if state in {"Completed", "N/A"}:
        return Check("fabric-manager", "pass", f"fabric state {state}")
    return Check("fabric-manager", "fail", f"fabric state {state} (nvidia-fabricmanager not ready)")


def check_ib(sys_ib: Path = Path("/sys/class/infiniband")) -> Check:
    if not sys_ib.is_dir() or not any(sys_ib.iterdir()):
        return Check("ib-ports", "skipped", "no InfiniBand/RoCE devices")
    out = run_tool(["ibstat"]) or run_tool(["ibv_devinfo"])
    if out is None:
        return Check("ib-ports", "skipped", "neither ibstat nor ibv_devinfo installed")
    states = re.findall(r"State:\s*(\w+)", out.stdout) or re.findall(r"state:\s*PORT_(\w+)", out.stdout)
    down = [s for s in states if s.upper() != "ACTIVE"]
    evidence = f"port states: {', '.join(states) or 'none reported'}"
    if down:
        return Check("ib-ports", "fail", evidence)
    return Check("ib-ports", "pass", evidence)


def check_versions(versions: Mapping[str, str]) -> Check:
    out = run_tool(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    shown = dict(versions)
    if out is not None and out.returncode == 0 and out.stdout.strip():
        shown["driver"] = out.stdout.strip().splitlines()[0]
    return Check("versions", "pass", ", ".join(f"{k} {v}" for k, v in shown.items()) or "unknown")


def run_checks(
    *,
    env: Mapping[str, str] | None = None,
    multi_host: bool = False,
    expected_gpus: int | None = None,
    versions: Mapping[str, str] | None = None,
) -> list[Check]:
    env = os.environ if env is None else env
    host = socket.gethostname()
    rdma = Path("/sys/class/infiniband").is_dir() and any(Path("/sys/class/infiniband").iterdir())
    steps: list[Callable[[], Check]] = [
        lambda: check_interfaces(env, multi_host=multi_host),
        check_shm,
        lambda: check_memlock(rdma),
        lambda: check_gpus(expected_gpus),
        check_xid,
        check_topology,
        check_acs,
        check_fabric_manager,
        check_ib,
        lambda: check_versions(versions or {}),
    ]
    checks = []
    for step in steps:
        try:
            check = step()
        except Exception as error:  # a broken check must not hide the others
            check = Check(getattr(step, "__name__", "check"), "skipped", f"check failed to run: {error}")
        check.host = host
        checks.append(check)
    return checks
