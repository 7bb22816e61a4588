"""The shrink passes in the order the minimizer runs them: Relax passes, structure, shapes, dtypes, values, attributes."""

from __future__ import annotations

from .candidates import Pass
from .graph_passes import (
                           bypass_nodes,
                           default_attrs,
                           drop_optional_operands,
                           drop_unused_inputs,
                           fewer_outputs,
                           rehead,
                           replace_by_values,
                           truncate,
)
from .pass_sequence import fewer_tvm_passes
from .shape_passes import fewer_dims, smaller_dims
from .value_passes import fewer_input_sets, simpler_dtypes, simpler_values

PASSES: tuple[Pass, ...] = (
    fewer_tvm_passes,  # first: every later check compiles fewer passes
    fewer_outputs,
    rehead,  # a training case's truncate: the loss moves up the graph
    truncate,
    bypass_nodes,
    replace_by_values,
    drop_optional_operands,
    drop_unused_inputs,
    fewer_input_sets,
    fewer_dims,  # before smaller_dims: dropping a size-1 dim is nearly free, and the dims then tried are final
    smaller_dims,
    simpler_dtypes,
    simpler_values,
    default_attrs,
)
