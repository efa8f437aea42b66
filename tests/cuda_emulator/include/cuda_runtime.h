// Empty: cuda_emu.h stands in for the CUDA runtime on the CPU.
#pragma once
