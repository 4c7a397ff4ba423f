#!/usr/bin/env python3
"""Report failed Slurm jobs to ncclbot's webhook without ever holding up slurmctld.

Install on the controller as `EpilogSlurmctld` (or as the `jobcomp/script` JobCompLoc). For a job that
FAILED, hit its TIMEOUT, lost a node (NODE_FAIL) or ran out of memory, it writes the event to a spool
folder and returns at once; a detached process then, when ncclbot is installed here, runs
`ncclbot diagnose --job-id ID --json --no-store` next to the logs so only the diagnosis travels (else
the bot reads the logs itself), signs the event (HMAC-SHA256 over "<timestamp>.<body>") and posts it.
Events the bot could not take (down, 5xx) stay spooled and are retried by the next job's epilog or by
`ncclbot-epilog --flush` from a timer. Python 3.8+ standard library only; one file, copy it anywhere.

Settings: environment variables, else KEY=VALUE lines in $NCCLBOT_EPILOG_CONFIG
(default /etc/ncclbot/epilog.conf):
  NCCLBOT_WEBHOOK_URL          http://ncclbot.example:3000/webhooks/job-failed (required)
  NCCLBOT_WEBHOOK_SECRET       the shared secret (or NCCLBOT_WEBHOOK_SECRET_FILE: a file holding it)
  NCCLBOT_EPILOG_SPOOL         spool folder (default /var/spool/ncclbot-epilog)
  NCCLBOT_EPILOG_CLUSTER       cluster name (default SLURM_CLUSTER_NAME)
  NCCLBOT_EPILOG_CHANNEL       Slack channel for this cluster's failures (default: the bot's)
  NCCLBOT_BIN                  ncclbot executable on this host (default: `ncclbot` on PATH, if any;
                               "none" to always let the bot read the logs)
  NCCLBOT_EPILOG_DIAGNOSE_TIMEOUT  seconds for the local diagnosis (default 300)
  NCCLBOT_EPILOG_POST_TIMEOUT  seconds for one HTTP post (default 10)
  NCCLBOT_EPILOG_MAX_AGE_DAYS  spooled events older than this are given up (default 7)
  SCONTROL                     scontrol executable (default scontrol)
"""

import fcntl
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

PASSED_TO_CHILDREN = ("PATH", "SLURM_CONF")
OWN_VARIABLES = ("NCCLBOT_EPILOG_", "NCCLBOT_WEBHOOK_URL", "NCCLBOT_WEBHOOK_SECRET", "NCCLBOT_BIN")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FAILED_STATES = {"FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
# scontrol's Reason while the job is still COMPLETING (the epilog runs before the final state).
REASON_STATES = {
    "NonZeroExitCode": "FAILED",
    "JobLaunchFailure": "FAILED",
    "TimeLimit": "TIMEOUT",
    "NodeDown": "NODE_FAIL",
    "NodeFail": "NODE_FAIL",
    "OutOfMemory": "OUT_OF_MEMORY",
    "Deadline": "DEADLINE",
}
NO_ARRAY_TASK = "4294967294"  # Slurm's NO_VAL: not part of an array
MAX_DIAGNOSES = 5
MAX_EVIDENCE = 20
MAX_SPOOLED_PER_RUN = 200


def log(message):
    # slurmctld keeps the epilog's stderr in its log only when debugging; keep it short.
    sys.stderr.write(f"ncclbot-epilog: {message}\n")


def settings():
    values = {}
    path = os.environ.get("NCCLBOT_EPILOG_CONFIG", "/etc/ncclbot/epilog.conf")
    if os.path.isfile(path):
        with open(path) as handle:
            for line in handle:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, _, value = line.partition("=")
                    values[key.strip()] = value.strip().strip('"')
        # slurmctld runs the epilog with an almost empty environment (no PATH, no SLURM_CONF): the
        # config file may give them, else a standard PATH, so that scontrol and ncclbot are found.
        for key in PASSED_TO_CHILDREN:
            if key in values:
                os.environ.setdefault(key, values.pop(key))
    for key, value in os.environ.items():
        if key.startswith(("NCCLBOT_", "SCONTROL")):
            values[key] = value
    os.environ.setdefault("PATH", DEFAULT_PATH)
    secret_file = values.get("NCCLBOT_WEBHOOK_SECRET_FILE")
    if secret_file and not values.get("NCCLBOT_WEBHOOK_SECRET"):
        with open(secret_file) as handle:
            values["NCCLBOT_WEBHOOK_SECRET"] = handle.read().strip()
    return values


def run(argv, timeout, env=None):
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return 1, "", str(error)
    return done.returncode, done.stdout, done.stderr


def scontrol_fields(config, job_id):
    """JobState, Reason, Restarts, StdOut... of the job from `scontrol show job` (multi-line form:
    the path fields are alone on their lines, so values with spaces stay whole)."""
    status, out, _ = run([config.get("SCONTROL", "scontrol"), "show", "job", job_id], timeout=5)
    fields = {}
    if status != 0:
        return fields
    for line in out.splitlines():
        line = line.strip()
        for key in ("StdOut", "StdErr", "WorkDir", "JobName"):
            if line.startswith(key + "=") and key not in fields:
                fields[key] = line[len(key) + 1 :]
                line = ""
        for part in line.split():
            key, sep, value = part.partition("=")
            if sep and key not in fields:
                fields[key] = value
    return fields


def array_name(array_job, array_task):
    """`1234_7` for a task of an array job (the id users see), None for other jobs."""
    if array_job in (None, "", "0") or array_task in (None, "", NO_ARRAY_TASK):
        return None
    return f"{array_job}_{array_task}"


def event_from_epilog(config, env):
    """The Slurm payload of an EpilogSlurmctld run, or None when the job did not fail."""
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job_id:
        return None
    fields = scontrol_fields(config, job_id)
    state = fields.get("JobState", "")
    reason = fields.get("Reason", "")
    exit_code = env.get("SLURM_JOB_EXIT_CODE2") or fields.get("ExitCode") or "0:0"
    derived = env.get("SLURM_JOB_DERIVED_EC", "0")
    if state in FAILED_STATES:
        final = state
    elif reason in REASON_STATES:
        final = REASON_STATES[reason]
    elif state in ("CANCELLED", "COMPLETED", "PREEMPTED"):
        return None
    elif exit_code not in ("0:0", "") or derived not in ("0", ""):
        final = "FAILED"
    else:
        return None
    array_job = env.get("SLURM_ARRAY_JOB_ID") or fields.get("ArrayJobId")
    array_task = env.get("SLURM_ARRAY_TASK_ID") or fields.get("ArrayTaskId")
    public_id = array_name(array_job, array_task) or job_id
    return {
        "source": "slurm",
        "hook": "epilog_slurmctld",
        "cluster": config.get("NCCLBOT_EPILOG_CLUSTER") or env.get("SLURM_CLUSTER_NAME") or "default",
        "job_id": public_id,
        "array_job_id": array_job or None,
        "array_task_id": array_task or None,
        "job_name": env.get("SLURM_JOB_NAME") or fields.get("JobName"),
        "user": env.get("SLURM_JOB_USER"),
        "partition": env.get("SLURM_JOB_PARTITION"),
        "state": final,
        "reason": reason or None,
        "exit_code": exit_code,
        # scontrol's NodeList is already empty while COMPLETING: the environment has it.
        "node_list": env.get("SLURM_JOB_NODELIST") or fields.get("BatchHost"),
        "work_dir": fields.get("WorkDir") or env.get("SLURM_JOB_WORK_DIR"),
        "std_out": fields.get("StdOut") or env.get("SLURM_JOB_STDOUT"),
        "std_err": fields.get("StdErr") or env.get("SLURM_JOB_STDERR"),
        "restart_count": int(env.get("SLURM_JOB_RESTART_COUNT") or fields.get("Restarts") or 0),
    }


def event_from_jobcomp(config, env):
    """The Slurm payload of a jobcomp/script run (it has the final JOBSTATE), or None."""
    state = env.get("JOBSTATE", "")
    if state not in FAILED_STATES:
        return None
    job_id = array_name(env.get("ARRAYJOBID"), env.get("ARRAYTASKID")) or env["JOBID"]
    return {
        "source": "slurm",
        "hook": "jobcomp",
        "cluster": config.get("NCCLBOT_EPILOG_CLUSTER") or env.get("CLUSTER") or "default",
        "job_id": job_id,
        "job_name": env.get("JOBNAME"),
        "user": env.get("USERNAME"),
        "partition": env.get("PARTITION"),
        "state": state,
        "exit_code": env.get("EXITCODE"),
        "node_list": env.get("NODES"),
        "work_dir": env.get("WORK_DIR"),
        "std_out": env.get("STDOUT"),
        "std_err": env.get("STDERR"),
        "restart_count": int(env.get("RESTARTCNT") or 0),
    }


def spool_dir(config):
    path = config.get("NCCLBOT_EPILOG_SPOOL", "/var/spool/ncclbot-epilog")
    os.makedirs(os.path.join(path, "rejected"), mode=0o700, exist_ok=True)
    return path


def spool(config, event):
    folder = spool_dir(config)
    name = f"{int(time.time() * 1000)}-{event['cluster']}-{event['job_id'].replace('/', '_')}.json"
    temporary = os.path.join(folder, "." + name)
    with open(temporary, "w") as handle:
        json.dump({"event": event, "spooled_at": time.time(), "tries": 0}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(temporary, os.path.join(folder, name))  # atomic: a deliverer never sees half a file


def start_deliverer():
    """A detached `--deliver` run: its own session, no inherited pipes (slurmctld waits on those)."""
    subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--deliver"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def ncclbot_bin(config):
    configured = config.get("NCCLBOT_BIN")
    if configured == "none":
        return None
    return configured or shutil.which("ncclbot")


def trimmed(document):
    """The diagnosis with a few evidence lines: enough to post, small enough to travel."""
    diagnoses = []
    for entry in (document.get("diagnoses") or [])[:MAX_DIAGNOSES]:
        entry = dict(entry)
        entry["evidence"] = (entry.get("evidence") or [])[:MAX_EVIDENCE]
        diagnoses.append(entry)
    keep = ("schema_version", "analysis_version", "culprit", "symptom", "stats")
    result = {key: document[key] for key in keep if key in document}
    result["diagnoses"] = diagnoses
    return result


def diagnose_here(config, event):
    program = ncclbot_bin(config)
    if not program:
        return None
    argv = [
        program,
        "diagnose",
        "--job-id",
        event["job_id"],
        "--cluster",
        event["cluster"],
        "--json",
        "--no-store",
    ]
    # ncclbot refuses NCCLBOT_* variables it does not know: it gets none of this hook's own.
    env = {key: value for key, value in os.environ.items() if not key.startswith(OWN_VARIABLES)}
    status, out, err = run(argv, timeout=float(config.get("NCCLBOT_EPILOG_DIAGNOSE_TIMEOUT", 300)), env=env)
    if status != 0:
        why = err.strip()[:200]
        log(f"local diagnosis of job {event['job_id']} failed ({why}); the bot will read the logs")
        return None
    try:
        return trimmed(json.loads(out))
    except ValueError:
        return None


def post(config, event):
    """HTTP status of the post (0: no answer at all)."""
    url, secret = config.get("NCCLBOT_WEBHOOK_URL"), config.get("NCCLBOT_WEBHOOK_SECRET", "")
    body = json.dumps(event).encode()
    timestamp = str(int(time.time()))
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-NCCLBot-Timestamp": timestamp,
            "X-NCCLBot-Signature": "v1=" + mac,
            "User-Agent": "ncclbot-epilog/1",
        },
    )
    try:
        with urllib.request.urlopen(
            request, timeout=float(config.get("NCCLBOT_EPILOG_POST_TIMEOUT", 10))
        ) as answer:
            return answer.status, ""
    except urllib.error.HTTPError as error:
        return error.code, error.read(2000).decode("utf-8", "replace")
    except (OSError, ValueError) as error:
        return 0, str(error)


def deliver(config):
    """Post every spooled event, oldest first; stop at the first the bot could not take."""
    folder = spool_dir(config)
    with open(os.path.join(folder, ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another deliverer is at it
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and not n.startswith("."))
        max_age = float(config.get("NCCLBOT_EPILOG_MAX_AGE_DAYS", 7)) * 86400
        for name in names[:MAX_SPOOLED_PER_RUN]:
            path = os.path.join(folder, name)
            with open(path) as handle:
                item = json.load(handle)
            event = item["event"]
            if time.time() - item["spooled_at"] > max_age:
                os.rename(path, os.path.join(folder, "rejected", name))
                log(f"gave up on {name}: older than {max_age / 86400:g} days")
                continue
            if "diagnosis" not in event and not item.get("diagnosed"):
                diagnosis = diagnose_here(config, event)
                if diagnosis is not None:
                    event["diagnosis"] = diagnosis
                item["diagnosed"] = True
            if config.get("NCCLBOT_EPILOG_CHANNEL") and not event.get("channel"):
                event["channel"] = config["NCCLBOT_EPILOG_CHANNEL"]
            status, detail = post(config, event)
            if 200 <= status < 300:
                os.remove(path)
            elif status in (400, 401, 403, 404, 413, 422):
                # The bot will never take it as it is: keep it for a person, do not retry forever.
                item["error"] = f"{status} {detail[:500]}"
                with open(os.path.join(folder, "rejected", name), "w") as handle:
                    json.dump(item, handle)
                os.remove(path)
                log(f"the bot refused {name}: {status} {detail[:200]}")
            else:
                item["tries"] = item.get("tries", 0) + 1
                item["last_error"] = f"{status} {detail[:500]}"
                with open(path + ".tmp", "w") as handle:
                    json.dump(item, handle)
                os.replace(path + ".tmp", path)
                log(f"the bot is not taking events ({status} {detail[:200]}); {name} stays spooled")
                return 1
    return 0


def main(argv):
    config = settings()
    if not config.get("NCCLBOT_WEBHOOK_URL"):
        log("NCCLBOT_WEBHOOK_URL is not set; nothing reported")
        return 0
    if "--deliver" in argv or "--flush" in argv:
        return deliver(config)
    env = os.environ
    event = (
        event_from_jobcomp(config, env)
        if "JOBSTATE" in env and "JOBID" in env
        else event_from_epilog(config, env)
    )
    if event is None:
        return 0
    spool(config, event)
    start_deliverer()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Exception as error:  # never fail a job's epilog over a report
        log(f"internal error: {type(error).__name__}: {error}")
        sys.exit(0)
