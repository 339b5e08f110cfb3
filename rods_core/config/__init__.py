"""The run config package: RunConfig and every section class, which the components import from here;
it imports nothing from rods_core but the input-reading primitives (rods_core.config.inputs), the prompt files and the
benchmark registry's table (rods_core.config.benchmark_entries, a leaf: the names a `benchmark:` may take)."""

from rods_core.config.boundary import BoundaryConfig
from rods_core.config.buffer import BufferConfig
from rods_core.config.loading import (
    ConfigError,
    dump_config,
    format_validation_error,
    load_config,
    parse_override,
    parse_overrides,
    read_config_data,
    set_dotted,
)
from rods_core.config.policy import EpisodeConfig, PromptConfig, SamplingConfig, SFTSettings, TinyModelConfig
from rods_core.config.report import ReportSettings
from rods_core.config.run import (
    CATEGORIES,
    METHODS,
    SYNTH_METHODS,
    BenchmarkName,
    Category,
    ComputeSettings,
    EvalSettings,
    GRPOSettings,
    Method,
    ModelSettings,
    RunConfig,
    SeedSettings,
)
from rods_core.config.synth import ConfigRenamedWarning, SynthesisConfig

__all__ = [
    "CATEGORIES",
    "METHODS",
    "BenchmarkName",
    "BoundaryConfig",
    "BufferConfig",
    "Category",
    "ComputeSettings",
    "ConfigError",
    "ConfigRenamedWarning",
    "EpisodeConfig",
    "EvalSettings",
    "GRPOSettings",
    "Method",
    "ModelSettings",
    "PromptConfig",
    "ReportSettings",
    "RunConfig",
    "SFTSettings",
    "SYNTH_METHODS",
    "SamplingConfig",
    "SeedSettings",
    "SynthesisConfig",
    "TinyModelConfig",
    "dump_config",
    "format_validation_error",
    "load_config",
    "parse_override",
    "parse_overrides",
    "read_config_data",
    "set_dotted",
]
