"""The temp folders chartrl makes for itself on a shared machine are the user's alone (0700), and the files there
that could hold a secret are 0600: the local Ray head's folder (Ray's own temp folder, which Ray opens to every
user, lies inside it), its token and log, the forkserver's logs. A head's folder that another user made first is
refused. (tests/test_launch.py checks, with a real head, that another user reads no secret in it.)"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from chartrl import forkserver
from chartrl.ray_head import RAY_DIR, HeadError, HeadState, head_command, head_lock, private_folder, write_private

ANOTHER_USER = 65534  # nobody


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    "existing",
    [
        None,  # made by chartrl
        0o777,  # as Ray leaves a temp folder it was given
        0o755,  # as a umask of 022 makes one
    ],
)
def test_the_heads_temp_folder_is_the_users_alone(tmp_path, existing):
    folder = tmp_path / "head"
    if existing is not None:
        folder.mkdir()
        folder.chmod(existing)
    with head_lock(folder):  # what a workflow run does first
        assert mode(folder) == 0o700
    assert mode(private_folder(folder)) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another user")
def test_a_temp_folder_another_user_made_first_is_refused(tmp_path):
    folder = tmp_path / "chartrl-ray-squatted"
    folder.mkdir()
    folder.chmod(0o777)
    os.chown(folder, ANOTHER_USER, ANOTHER_USER)
    with pytest.raises(HeadError, match=f"{folder} belongs to user {ANOTHER_USER}.*ray.temp_dir"):
        private_folder(folder)
    assert mode(folder) == 0o777  # left as it was: not ours to change


def test_rays_temp_folder_lies_inside_the_heads():
    state = HeadState(0, "/tmp/chartrl-ray-0123abcd", 20000, "http://127.0.0.1:20001", "/tmp/x/auth_token")
    command = head_command(state, num_cpus=1, num_gpus=0)
    assert command[command.index("--temp-dir") + 1] == f"/tmp/chartrl-ray-0123abcd/{RAY_DIR}"


def test_a_private_file_is_0600_even_when_it_existed_wider(tmp_path):
    token = tmp_path / "auth_token"
    token.write_text("old")
    token.chmod(0o644)
    write_private(token, "new")
    assert mode(token) == 0o600 and token.read_text() == "new"


def test_a_forkservers_log_is_the_users_alone(tmp_path):
    socket = tmp_path / "env.sock"
    forkserver._start_server(socket, ["true"])  # the server command exits at once: only its log matters here
    assert mode(socket.with_suffix(".log")) == 0o600
