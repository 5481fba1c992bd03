"""HTA's configuration objects: ``ParserConfig``, ``ParserBackend``, ``TraceType`` (``hta.configs.parser_config``)
and ``HtaConfig`` (``hta.configs.config``).

holotrace has one decoder, so a ``ParserConfig`` is accepted wherever HTA takes one and its settings are kept
as given; what holotrace honours: ``parse_all_args=True`` (or ``set_parse_all_args(True)``) reads every event
arg, as ``holotrace.load(..., all_args=True)``. A parser backend may be chosen (any :class:`ParserBackend`
member, or its value); every backend gives the same rows, as in HTA. ``HtaConfig`` reads HTA's JSON config
files (``~/.hta/trace_analyzer.json``, ``./trace_analyzer.json``, then the file given) and answers
``get_config("a.b.c")``; it does not reconfigure logging. HTA's arg specifications and arg sets
(``ParserConfig.ARGS_DEFAULT``, ``get_default_args()``, ``make_attribute_spec``, ...) come from
:mod:`holotrace.compat.arg_specs`; ``ParserConfig()`` holds HTA's default set, and ``set_default_cfg`` changes
what ``get_default_cfg()`` returns, as in HTA.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from enum import Enum
from pathlib import Path
from typing import Any, Optional

from holotrace.compat import arg_specs
from holotrace.compat.arg_specs import ARG_SETS, DEFAULT_PARSE_VERSION, AttributeSpec, YamlVersion

__all__ = ["ParserBackend", "TraceType", "ParserConfig", "HtaConfig", "AttributeSpec", "AVAILABLE_ARGS", "logger"]

logger = logging.getLogger("holotrace")  # HTA's ``hta.configs.config.logger``: where holotrace logs

AVAILABLE_ARGS = arg_specs.AVAILABLE_ARGS


class ParserBackend(str, Enum):
    """HTA's parser backends (holotrace decodes every trace with its one scanner; the choice is kept)."""

    JSON = "json"
    IJSON = "ijson"
    IJSON_BATCHED = "ijson_batched"
    IJSON_BATCH_AND_COMPRESS = "ijson_batch_and_compress"


class TraceType(str, Enum):
    Training = "training"
    TrainingWoProfilerstepAnnot = "training_wo_profilerstep_annot"
    Inference = "inference"


class ParserConfig:
    """HTA's parser configuration, accepted and kept; ``parse_all_args`` is honoured (see the module)."""

    DEFAULT_MIN_REQUIRED_COLS: list[str] = ["ts", "dur", "name", "cat", "pid", "tid"]
    ARGS_INDEX = ARG_SETS["ARGS_INDEX"]
    ARGS_INPUT_SHAPE = ARG_SETS["ARGS_INPUT_SHAPE"]
    ARGS_BANDWIDTH = ARG_SETS["ARGS_BANDWIDTH"]
    ARGS_SYNC = ARG_SETS["ARGS_SYNC"]
    ARGS_MINIMUM = ARG_SETS["ARGS_MINIMUM"]
    ARGS_COMPLETE = ARG_SETS["ARGS_COMPLETE"]
    ARGS_INFO = ARG_SETS["ARGS_INFO"]
    ARGS_COMMUNICATION = ARG_SETS["ARGS_COMMUNICATION"]
    ARGS_TRITON_KERNELS = ARG_SETS["ARGS_TRITON_KERNELS"]
    ARGS_DEFAULT = ARG_SETS["ARGS_DEFAULT"]

    def __init__(
        self,
        args: Optional[list] = None,
        user_provide_trace_type: Optional[TraceType] = None,
        version: Any = None,
        parse_all_args: bool = False,
        selected_arg_keys: Optional[list[str]] = None,
        skip_event_types: Optional[set[str]] = None,
        convert_ts_to_integer: bool = True,
    ) -> None:
        self.args: list = []
        self.arg_map: dict[str, Any] = {}
        self.add_args(list(args) if args else ParserConfig.get_default_args())
        self.parser_backend: Optional[ParserBackend] = None
        self.trace_memory = False
        self.user_provide_trace_type = user_provide_trace_type
        self.skip_event_types: set[str] = skip_event_types if skip_event_types is not None else {"python_function"}
        self.min_required_cols: list[str] = list(self.DEFAULT_MIN_REQUIRED_COLS)
        self.drop_gpu_user_annotation = True
        self.version = version if version is not None else DEFAULT_PARSE_VERSION
        self.max_event_duration_us: Optional[int] = None
        self.parse_all_args = bool(parse_all_args)
        self.selected_arg_keys = selected_arg_keys
        self.batch_size = 1000
        self.convert_ts_to_integer = convert_ts_to_integer

    def clone(self) -> ParserConfig:
        return copy.deepcopy(self)

    @classmethod
    def get_default_cfg(cls) -> ParserConfig:
        """A copy of the process-wide default (:meth:`set_default_cfg` changes it)."""
        return _DEFAULT[0].clone()

    @classmethod
    def get_versioned_cfg(cls, version: YamlVersion) -> ParserConfig:
        return cls(version=version)

    @classmethod
    def set_default_cfg(cls, cfg: ParserConfig) -> None:
        _DEFAULT[0] = cfg.clone()

    @staticmethod
    def set_global_parser_config_version(version: YamlVersion) -> None:
        """A fresh default configuration of ``version`` (holotrace has one arg table, whatever the version)."""
        _DEFAULT[0] = ParserConfig(version=version)

    @classmethod
    def get_minimum_args(cls, version: YamlVersion = DEFAULT_PARSE_VERSION) -> list[AttributeSpec]:
        return list(cls.ARGS_MINIMUM)

    @classmethod
    def get_default_args(cls, version: YamlVersion = DEFAULT_PARSE_VERSION) -> list[AttributeSpec]:
        return list(cls.ARGS_DEFAULT)

    @classmethod
    def get_info_args(cls, version: YamlVersion = DEFAULT_PARSE_VERSION) -> list[AttributeSpec]:
        return list(cls.ARGS_INFO)

    @classmethod
    def get_all_available_args(cls) -> dict[str, AttributeSpec]:
        return AVAILABLE_ARGS

    @classmethod
    def show_available_args(cls) -> None:
        from pprint import pprint

        pprint(AVAILABLE_ARGS)

    @classmethod
    def enable_communication_args(
        cls, cfg: Optional[ParserConfig] = None, version: YamlVersion = DEFAULT_PARSE_VERSION
    ) -> ParserConfig:
        """Add the communication args to ``cfg`` (or to the process-wide default) and return it."""
        cfg = cfg if cfg is not None else _DEFAULT[0]
        cfg.add_args(cls.ARGS_COMMUNICATION)
        return cfg

    transform_arg_name = staticmethod(arg_specs.transform_arg_name)
    make_attribute_spec = staticmethod(arg_specs.make_attribute_spec)

    @classmethod
    def infer_attribute_specs(cls, args, reference_specs: Optional[dict[str, AttributeSpec]] = None) -> dict:
        """Specs of every arg key in a series of ``args`` dicts, keyed by raw name; a key found among
        ``reference_specs`` (by raw name) keeps that spec, except ``name``."""
        out = {s.raw_name: s for s in (reference_specs or {}).values()}
        seen: set[str] = set()
        for d in args.dropna():
            if isinstance(d, dict):
                for key, value in d.items():
                    seen.add(key)
                    if key not in out or key == "name":
                        out[key] = arg_specs.make_attribute_spec(key, value)
        return {k: v for k, v in out.items() if k in seen}

    def __repr__(self) -> str:
        return (
            f"ParserConfig(args={list(self.arg_map)}, parse_all_args={self.parse_all_args}, "
            f"parser_backend={self.parser_backend})"
        )

    def get_fingerprint_key(self) -> tuple:
        return tuple(sorted(self.arg_map)), self.parse_all_args

    def set_args(self, args: list) -> None:
        self.args, self.arg_map = [], {}
        self.add_args(args)

    def add_args(self, args: list) -> None:
        for a in args:
            name = getattr(a, "name", str(a))
            if name not in self.arg_map:
                self.args.append(a)
                self.arg_map[name] = a

    def get_args(self) -> list:
        if self.selected_arg_keys is not None:
            return [self.arg_map[k] for k in self.selected_arg_keys if k in self.arg_map]
        return self.args

    def set_min_required_cols(self, cols: list[str]) -> None:
        self.min_required_cols = list(cols)

    def get_min_required_cols(self) -> list[str]:
        return self.min_required_cols

    def set_trace_memory(self, trace_memory: bool) -> None:
        self.trace_memory = bool(trace_memory)

    def set_drop_gpu_user_annotation(self, should_drop: bool) -> None:
        self.drop_gpu_user_annotation = bool(should_drop)

    def set_parser_backend(self, parser_backend: Optional[ParserBackend]) -> None:
        """Any :class:`ParserBackend` member or value (e.g. ``"ijson_batched"``); ``ValueError`` otherwise."""
        self.parser_backend = None if parser_backend is None else ParserBackend(parser_backend)

    def set_parse_all_args(self, parse_all_args: bool) -> ParserConfig:
        self.parse_all_args = bool(parse_all_args)
        return self

    def set_args_selector(self, selected_arg_keys: Optional[list[str]]) -> ParserConfig:
        self.selected_arg_keys = selected_arg_keys
        return self

    def set_skip_event_types(self, skip_event_types: Optional[set[str]]) -> ParserConfig:
        self.skip_event_types = set(skip_event_types) if skip_event_types is not None else set()
        return self


_DEFAULT: list[ParserConfig] = [ParserConfig()]  # the process-wide default configuration (HTA's global)


def wants_all_args(parser_config) -> bool:
    """Whether a parser configuration (holotrace's or HTA's own object) asks for every event arg."""
    return bool(getattr(parser_config, "parse_all_args", False))


class HtaConfig:
    """HTA's JSON configuration: files read in order, later keys overriding earlier ones."""

    DEFAULT_CONFIG_FILENAME = "trace_analyzer.json"

    @staticmethod
    def get_default_paths() -> list[str]:
        name = HtaConfig.DEFAULT_CONFIG_FILENAME
        return [str(Path.home() / ".hta" / name), str(Path.cwd() / name)]

    def __init__(self, config_file_path: Optional[str] = None, load_default_paths: Optional[bool] = True):
        self.config_file_paths: list[str] = HtaConfig.get_default_paths() if load_default_paths else []
        if config_file_path:
            self.config_file_paths.append(str(config_file_path))
        self.config: dict[str, Any] = {}
        for path in self.get_config_file_paths():
            with open(path) as fp:
                self.config.update(json.load(fp))

    def get_config_file_paths(self) -> list[str]:
        return [p for p in self.config_file_paths if Path(p).is_file() and os.access(p, os.R_OK)]

    def get_config(self, dot_path: Optional[str] = None, default_value: Any = None) -> Any:
        """The value at ``a.b.c`` (``default_value`` when a key is missing); the whole config for ``None``."""
        if dot_path is None:
            return self.config
        cfg: Any = self.config
        for key in dot_path.split("."):
            if not isinstance(cfg, dict) or key not in cfg:
                return default_value
            cfg = cfg[key]
        return cfg

    def show(self) -> None:
        print(json.dumps(self.config, indent=4, sort_keys=True))

    @staticmethod
    def get_test_data_path(dataset: str) -> str:
        """``tests/data/<dataset>`` under the current folder (HTA: under its own source checkout), so that HTA's
        tests run from a checkout of HTA find their data."""
        return str(Path.cwd() / "tests" / "data" / dataset)
