/* SPDX-License-Identifier: MIT */
/*
 * `agentctl status`: the core's status snapshot (core.h) rendered for a
 * person (a table for a terminal: every name a process or file chose is
 * escaped, so no control byte reaches it) or as one JSON document (valid
 * whatever bytes the names hold).
 */
#pragma once

#include "core.h"

#include <stdio.h>

void fp_status_write_text(const struct fp_core_status *st, FILE *out);
void fp_status_write_json(const struct fp_core_status *st, FILE *out);
