// One persistent pool of worker threads. Workers sleep on a condition variable between calls:
// nothing spins once parallel_for returns, so other libraries run at full speed afterwards.
#pragma once
#include <cstddef>
#include <functional>

namespace nnkern {

// Runs fn(task) for task in [0, n_tasks), spread over the pool; returns when all are done.
// Tasks are claimed dynamically, so each one must compute the same thing wherever it runs
// (results never depend on the thread count). Calls from several threads at once are serialized.
void parallel_for(size_t n_tasks, const std::function<void(size_t task)>& fn);

void set_num_threads(int n);  // n >= 1
int get_num_threads();
int default_num_threads();    // the cores this process may run on

}  // namespace nnkern
