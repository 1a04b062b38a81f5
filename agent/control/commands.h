/* SPDX-License-Identifier: MIT */
/*
 * The agent's commands (start, stop, status, dump, flush) as a table for
 * the control socket (control.h); each runs with the agent core
 * (struct fp_core *, core.h) as its userdata.
 */
#pragma once

#include "control.h"

#include <stddef.h>

extern const struct fp_control_command fp_commands[];
extern const size_t fp_n_commands;
