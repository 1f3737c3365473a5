#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : enable
#if defined(GEMV_SG) && GEMV_SG
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
@EXTENSIONS@#if INPUT_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ELEM float16_t
#else
#define ELEM float
#endif
#if INPUT_ROUND_F16
@ROUND_F16@float to_in(float x) { return round_f16(x); }
#else
float to_in(ELEM x) { return float(x); }
#endif
#ifndef LOCAL_SIZE
#define LOCAL_SIZE 256
#endif
layout(local_size_x = LOCAL_SIZE) in;
layout(push_constant) uniform Push { uint M, N, K, lda, ldb, ldc, sa, sb, sc; } p;
