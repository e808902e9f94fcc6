#pragma once
// How a host that embeds kvparity (the Python module) stops long work between steps: the
// generation loops call check_interrupt() once per step, and the host's checker throws to abandon
// the run (e.g. on Ctrl-C). Work abandoned this way leaves nothing half-written that a later run
// reads: a generation starts by clearing its cache, and results files are written whole records at
// a time.
namespace kvp {

using InterruptCheck = void (*)();

// nullptr removes the checker (the default: the command-line tool has none).
void set_interrupt_check(InterruptCheck check);
void check_interrupt();

}  // namespace kvp
