/* Multiply-accumulate counts: stub until the benchmark work lands. */
#include "aot.h"

double mc_graph_macs(const mc_graph *g)
{
	(void)g;
	return 0;
}
