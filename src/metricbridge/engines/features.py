"""What turns on a feature a release catalogue ties a family to (``EngineFamily.features``).

The catalogue's tags name features (``hicache``, ``pd-disaggregation`` ...); a user needs the
switch: the SGLang server flag, or what else it takes when no flag does it (a hybrid SSM model).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["FEATURE_SWITCHES", "feature_switch"]

FEATURE_SWITCHES: Mapping[str, str] = MappingProxyType(
    {
        "hicache": "--enable-hierarchical-cache (HiCache)",
        "hicache-storage": "--enable-hierarchical-cache with --hicache-storage-backend "
        "(HiCache L3 storage)",
        "pd-disaggregation": "--disaggregation-mode prefill or decode (PD disaggregation)",
        "epd": "--encoder-only (an EPD encoder server, on its own /metrics)",
        "speculative-decoding": "--speculative-algorithm (speculative decoding)",
        "dp-attention": "--enable-dp-attention (DP attention)",
        "lora": "--enable-lora (LoRA adapters)",
        "streaming-session": "--enable-streaming-session (streaming sessions)",
        "priority-scheduling": "--enable-priority-scheduling (priority scheduling)",
        "eplb": "--enable-eplb (expert-parallel load balancing)",
        "tokens-histogram": "--collect-tokens-histogram",
        "hybrid-ssm": "a hybrid SSM (Mamba) model",
        "diffusion": "a diffusion server (sglang.multimodal_gen)",
    }
)


def feature_switch(tag: str) -> str:
    """What enables the feature ``tag``: a server flag where one does, else the tag's words."""
    return FEATURE_SWITCHES.get(tag, f"the {tag} feature")
