/* SPDX-License-Identifier: MIT */
/*
 * agentctl upload-debuginfo: CI's side of naming stripped builds. Every
 * ELF file with a symbol table under the paths given (a debug file from
 * objcopy --only-keep-debug, or an unstripped executable or library) is
 * sent to the collector by its build ID:
 *
 *   HEAD /buildid/ID/debuginfo    held already? (200: skipped)
 *   POST /buildid/ID/debuginfo    the file, with the write token
 *
 * so a second run over the same tree sends nothing. Files without a
 * build ID or symbols are skipped (a stripped binary names nothing), a
 * build met twice in one run is sent once, and symbolic links to
 * directories are not followed. One line per file on stdout, a summary
 * at the end; what failed goes to stderr as one line each.
 */
#pragma once

/*
 * argv: the arguments after "upload-debuginfo". The exit status: 0 all
 * held or uploaded, 1 some failed or were refused, 2 a usage error.
 */
int fp_ctl_upload_debuginfo(int argc, char **argv);
