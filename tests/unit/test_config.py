"""BrokerConfig.load: defaults < TOML file < LETTERBOX_* env < overrides, with
ConfigErrors that name the setting to fix."""
from __future__ import annotations

from pathlib import Path

import pytest

from letterbox.config import BrokerConfig, ConfigError


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "letterbox.toml"
    path.write_text(text)
    return path


def test_defaults_without_file_or_env() -> None:
    cfg = BrokerConfig.load(env={})
    assert cfg == BrokerConfig()
    assert (cfg.port, cfg.admin_port, cfg.sync) == (6650, 8080, "full")
    assert cfg.max_message_size == 5 * 1024 * 1024
    assert cfg.deduplication_enabled is False
    assert cfg.data_dir == Path("data")


def test_values_from_toml_file(tmp_path: Path) -> None:
    path = _toml(tmp_path, """
data_dir = "/var/lib/letterbox"
port = 7650
sync = "normal"
max-message-size = 1048576
deduplication_enabled = true
auto_topic_creation_type = "partitioned"
default_num_partitions = 4
cluster_name = "east"
""")
    cfg = BrokerConfig.load(config_file=path, env={})
    assert cfg.data_dir == Path("/var/lib/letterbox")
    assert cfg.port == 7650
    assert cfg.sync == "normal"
    assert cfg.max_message_size == 1048576  # dashed keys are accepted
    assert cfg.deduplication_enabled is True
    assert (cfg.auto_topic_creation_type, cfg.default_num_partitions) == ("partitioned", 4)
    assert cfg.cluster_name == "east"
    assert cfg.admin_port == 8080  # untouched settings keep their defaults


def test_env_vars_override_the_file(tmp_path: Path) -> None:
    path = _toml(tmp_path, 'port = 7650\nsync = "normal"\ncache_size_mb = 8\n')
    env = {
        "LETTERBOX_PORT": "7651",
        "LETTERBOX_DEDUPLICATION_ENABLED": "yes",
        "LETTERBOX_DATA_DIR": "/tmp/lb",
        "LETTERBOX_SOMETHING_ELSE": "ignored",  # not a setting: not our business
        "PORT": "1",  # no prefix: ignored
    }
    cfg = BrokerConfig.load(config_file=path, env=env)
    assert cfg.port == 7651
    assert cfg.sync == "normal"  # from the file, no env var for it
    assert cfg.cache_size_mb == 8
    assert cfg.deduplication_enabled is True
    assert cfg.data_dir == Path("/tmp/lb")


def test_env_defaults_to_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LETTERBOX_ADMIN_PORT", "9090")
    assert BrokerConfig.load().admin_port == 9090


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", True), ("true", True), ("On", True), (" YES ", True),
     ("0", False), ("false", False), ("off", False), ("No", False)],
)
def test_boolean_env_spellings(text: str, expected: bool) -> None:
    cfg = BrokerConfig.load(env={"LETTERBOX_AUTO_TOPIC_CREATION": text})
    assert cfg.auto_topic_creation is expected


def test_overrides_beat_env_and_file(tmp_path: Path) -> None:
    path = _toml(tmp_path, "port = 7650\nadmin_port = 7080\n")
    env = {"LETTERBOX_PORT": "7651", "LETTERBOX_ADMIN_PORT": "7081"}
    cfg = BrokerConfig.load(
        config_file=path, env=env, overrides={"port": 0, "admin_port": None, "sync": "off"}
    )
    assert cfg.port == 0  # a falsy override still wins
    assert cfg.admin_port == 7081  # None means "not given on the command line"
    assert cfg.sync == "off"


def test_overrides_are_validated() -> None:
    with pytest.raises(ConfigError, match="port must be between 0 and 65535, got 70000"):
        BrokerConfig.load(env={}, overrides={"port": 70000})


@pytest.mark.parametrize(
    ("env", "fragments"),
    [
        ({"LETTERBOX_PORT": "abc"}, ["LETTERBOX_PORT", "port", "'abc'"]),
        ({"LETTERBOX_DEDUPLICATION_ENABLED": "maybe"},
         ["LETTERBOX_DEDUPLICATION_ENABLED", "deduplication_enabled", "'maybe'"]),
        ({"LETTERBOX_MAX_MESSAGE_SIZE": "5MB"}, ["LETTERBOX_MAX_MESSAGE_SIZE", "'5MB'"]),
    ],
)
def test_bad_env_values_name_the_variable(env: dict[str, str], fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(env=env)
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("port = 70000", ["port must be between 0 and 65535, got 70000"]),
        ("admin_port = -1", ["admin_port must be between 0 and 65535, got -1"]),
        ('sync = "sometimes"', ["sync must be one of full, normal, off", "'sometimes'"]),
        ("max_message_size = 10", ["max_message_size must be between 1024", "got 10"]),
        ('auto_topic_creation_type = "lazy"', ["auto_topic_creation_type", "'lazy'"]),
        ("default_num_partitions = 0", ["default_num_partitions must be between 1 and 10000"]),
        ("cache_size_mb = -5", ["cache_size_mb must be >= 0, got -5"]),
        ('port = "six"', ["port has an invalid value 'six'", "letterbox.toml"]),
        ('deduplication_enabled = "sure"', ["deduplication_enabled has an invalid value 'sure'"]),
    ],
)
def test_bad_file_values_have_clear_messages(tmp_path: Path, text: str, fragments: list[str]) -> None:
    path = _toml(tmp_path, text + "\n")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(config_file=path, env={})
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    "text",
    ["port = 6650.5", "port = true", "cache_size_mb = [64]"],
)
def test_wrongly_typed_file_values_are_refused(tmp_path: Path, text: str) -> None:
    """A TOML value of the wrong type is an error, not silently converted."""
    path = _toml(tmp_path, text + "\n")
    name = text.split(" = ")[0]
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(config_file=path, env={})
    assert name in str(info.value)


def test_unknown_key_in_file_is_refused(tmp_path: Path) -> None:
    path = _toml(tmp_path, "port = 7650\nmax_msg_size = 100\n")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(config_file=path, env={})
    message = str(info.value)
    assert "unknown setting 'max_msg_size'" in message
    assert str(path) in message
    assert "max_message_size" in message  # lists the known settings


def test_missing_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="cannot read config file") as info:
        BrokerConfig.load(config_file=missing, env={})
    assert str(missing) in str(info.value)


def test_invalid_toml(tmp_path: Path) -> None:
    path = _toml(tmp_path, "port = = 1\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        BrokerConfig.load(config_file=path, env={})


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


def test_security_role_lists_from_env_and_toml(tmp_path: Path) -> None:
    cfg = BrokerConfig.load(env={"LETTERBOX_SUPER_USER_ROLES": "admin, ops ,"})
    assert cfg.super_user_roles == ["admin", "ops"]
    toml = tmp_path / "c.toml"
    toml.write_text('super_user_roles = ["root"]\nauthorization_enabled = true\n')
    cfg = BrokerConfig.load(toml, env={})
    assert cfg.super_user_roles == ["root"] and cfg.authorization_enabled
    toml.write_text("super_user_roles = 3\n")
    with pytest.raises(ConfigError, match="super_user_roles"):
        BrokerConfig.load(toml, env={})
