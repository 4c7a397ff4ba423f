"""The Slack front end: the only package that imports slack_bolt / slack_sdk.

- `client`: the Web API client (base URL from settings, retries for 429 / 5xx / connection errors).
- `outlet`: `SlackOutlet`, the Outlet protocol over chat.postMessage / chat.update / files_upload_v2.
- `files`: downloading a shared file (files.info, then url_private_download with the bot token).
- `middleware`: Events API retries dropped by event id, admin-only actions, the audit of every action.
- `work`: what a request becomes in the background (download, diagnose, publish) with bounded
  concurrency; `listeners/`: slash command, events, shortcuts, buttons, modals, App Home.
- `app`: the bolt App wired from these; `plug`: how `ncclbot serve` mounts it (HTTP and Socket Mode).
"""
