"""Hypothesis strategies for adversarial kernel inputs.

Every strategy draws structure before values and shrinks toward the simplest input: small shapes,
float32, no mask, seed 0, plain distributions. Invalid arguments raise
``hypothesis.errors.InvalidArgument`` naming the argument.
"""

from strategies.attention import attention_cases, decode_cases, varlen_cases
from strategies.jagged import jagged_offsets, offsets_from_lengths, segment_lengths
from strategies.jagged_softmax import jagged_softmax_cases
from strategies.masks import MASK_KINDS, MaskRecipe, build_mask, mask_recipes, masks
from strategies.shapes import boundary_values, few, sizes, tiled_sizes
from strategies.softmax import softmax_cases
from strategies.values import ValueRecipe, float_dtypes, materialize, value_recipes

__all__ = [
    "MASK_KINDS",
    "MaskRecipe",
    "ValueRecipe",
    "attention_cases",
    "boundary_values",
    "build_mask",
    "decode_cases",
    "few",
    "float_dtypes",
    "jagged_offsets",
    "jagged_softmax_cases",
    "mask_recipes",
    "masks",
    "materialize",
    "offsets_from_lengths",
    "segment_lengths",
    "sizes",
    "softmax_cases",
    "tiled_sizes",
    "value_recipes",
    "varlen_cases",
]
