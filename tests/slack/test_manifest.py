"""deploy/slack/manifest.yml asks for exactly what the handlers use: the slash command, the shortcut,
the events listened to, and the scopes of every Web API method and event the code calls (a method or
event added without its scope, or a scope left over, fails here)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "slack" / "manifest.yml"
SLACK_CODE = ROOT / "bot" / "slack"

# Web API method (as slack_sdk names it) -> bot scopes it needs (Slack's method reference).
METHOD_SCOPES: dict[str, set[str]] = {
    "chat_postMessage": {"chat:write", "chat:write.public"},
    "chat_update": {"chat:write"},
    "chat_postEphemeral": {"chat:write"},
    "files_info": {"files:read"},
    "files_upload_v2": {"files:write"},
    "conversations_history": {
        "channels:history",
        "groups:history",
        "im:history",
        "mpim:history",
        "metadata.message:read",
    },
    "conversations_replies": {"channels:history", "groups:history", "im:history", "mpim:history"},
    "usergroups_users_list": {"usergroups:read"},
    "views_open": set(),
    "views_publish": set(),
    "apps_connections_open": set(),  # the app-level token's connections:write, not a bot scope
}
# Event listened to -> (manifest bot events, scopes).
EVENT_SUBSCRIPTIONS: dict[str, tuple[set[str], set[str]]] = {
    "app_mention": ({"app_mention"}, {"app_mentions:read"}),
    "message": (
        {"message.channels", "message.groups", "message.im", "message.mpim"},
        {"channels:history", "groups:history", "im:history", "mpim:history"},
    ),
    "app_home_opened": ({"app_home_opened"}, set()),
}


def listener_registrations() -> dict[str, set[str]]:
    """`@app.command("/x")`, `@app.shortcut("y")`, `@app.event("z")` / `{"type": "z", ...}` in bot/slack."""
    found: dict[str, set[str]] = {"command": set(), "shortcut": set(), "event": set()}
    for path in SLACK_CODE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        constants = {
            node.targets[0].id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "app"):
                continue
            kind = node.func.attr
            if kind not in found or not node.args:
                continue
            argument = node.args[0]
            if isinstance(argument, ast.Dict):
                keys = [k.value for k in argument.keys if isinstance(k, ast.Constant)]
                argument = argument.values[keys.index("type")]
            if isinstance(argument, ast.Name):
                found[kind].add(constants[argument.id])
            elif isinstance(argument, ast.Constant):
                found[kind].add(argument.value)
    return found


def web_api_methods() -> set[str]:
    """Every `client.<method>(` / `self.client.<method>(` the Slack front end calls."""
    pattern = re.compile(r"client\.([a-z]+_[A-Za-z_0-9]+)\(")
    return {m for path in SLACK_CODE.rglob("*.py") for m in pattern.findall(path.read_text())}


def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


def test_commands_and_shortcuts_match_the_listeners() -> None:
    features = manifest()["features"]
    registered = listener_registrations()
    assert {c["command"] for c in features["slash_commands"]} == registered["command"] == {"/nccl"}
    assert {s["callback_id"] for s in features["shortcuts"]} == registered["shortcut"]
    assert all(s["type"] == "message" for s in features["shortcuts"])


def test_event_subscriptions_match_the_listeners() -> None:
    registered = listener_registrations()["event"]
    assert registered == set(EVENT_SUBSCRIPTIONS)
    expected = set().union(*(EVENT_SUBSCRIPTIONS[e][0] for e in registered))
    assert set(manifest()["settings"]["event_subscriptions"]["bot_events"]) == expected


def test_scopes_are_exactly_those_the_code_needs() -> None:
    methods = web_api_methods()
    unknown = methods - set(METHOD_SCOPES)
    assert not unknown, f"add the scopes of {sorted(unknown)} to METHOD_SCOPES and the manifest"
    needed = {"commands"}
    for method in methods:
        needed |= METHOD_SCOPES[method]
    for event in listener_registrations()["event"]:
        needed |= EVENT_SUBSCRIPTIONS[event][1]
    assert set(manifest()["oauth_config"]["scopes"]["bot"]) == needed


def test_interactivity_and_home_tab_are_on_and_every_url_is_the_events_route() -> None:
    document = manifest()
    settings = document["settings"]
    assert settings["interactivity"]["is_enabled"] is True
    assert document["features"]["app_home"]["home_tab_enabled"] is True
    urls = [settings["interactivity"]["request_url"], settings["event_subscriptions"]["request_url"]]
    urls += [c["url"] for c in document["features"]["slash_commands"]]
    assert all(url.endswith("/slack/events") for url in urls)
