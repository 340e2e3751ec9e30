#include <criterion/criterion.h>

#include "modelc.h"

Test(dtype, half_roundtrip)
{
	cr_assert_eq(mc_float_to_half(1.0f), 0x3c00);
	cr_assert_float_eq(mc_half_to_float(0x3c00), 1.0f, 0);
	cr_assert_eq(mc_float_to_half(65504.0f), 0x7bff);
	cr_assert_eq(mc_float_to_half(1e6f), 0x7c00);
	cr_assert_float_eq(mc_half_to_float(0x0001), 5.9604645e-8f, 1e-12);
}
