/*
 * Reset and vectors for the MPS2 AN386 board (Cortex-M4F) under
 * qemu-system-arm: enables the FPU, copies .data from flash, zeroes .bss,
 * opens the semihosting console (newlib's librdimon) and calls main;
 * main's return value ends the run (semihosting exit).
 */
#include <stdint.h>
#include <stdlib.h>

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[], __stack_top[];
extern void initialise_monitor_handles(void);
extern int main(void);

void Reset_Handler(void);
void Fault_Handler(void);

void Reset_Handler(void)
{
	/* CP10 and CP11 (the FPU) full access, before any float instruction */
	*(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
	__asm volatile("dsb\n\tisb" ::: "memory");
	for (uint32_t *s = __data_load, *d = __data_start; d < __data_end;)
		*d++ = *s++;
	for (uint32_t *d = __bss_start; d < __bss_end;)
		*d++ = 0;
	initialise_monitor_handles();
	exit(main());
}

/* a fault ends the run with status 3 instead of hanging the emulator */
void Fault_Handler(void)
{
	exit(3);
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
	(void (*)(void))(uintptr_t)__stack_top, /* initial stack pointer */
	Reset_Handler,
	Fault_Handler, /* NMI */
	Fault_Handler, /* HardFault */
	Fault_Handler, /* MemManage */
	Fault_Handler, /* BusFault */
	Fault_Handler, /* UsageFault */
};
