
        {
          const uint ao = cur * A_SIZE, bo = cur * B_SIZE;
#if WG_SCOPE
          coopMatLoadNV(wa, As, ao, A_STRIDE, bool(TRANS_A));
          coopMatLoadNV(wb, Bs, bo, B_STRIDE, bool(TRANS_B));
          wacc = coopMatMulAddNV(wa, wb, wacc);
#else
          [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
#if TRANS_A
              coopMatLoadNV(fa[i], As, ao + kk * A_STRIDE + (wm * WTM + i * 16u) / 8u, A_STRIDE, true);
#else
              coopMatLoadNV(fa[i], As, ao + (wm * WTM + i * 16u) * A_STRIDE + kk / 8u, A_STRIDE, false);
#endif
            }
            [[unroll]] for (uint j = 0u; j < TN; ++j) {
#if TRANS_B
              coopMatLoadNV(fb[j], Bs, bo + (wn * WTN + j * 8u) * B_STRIDE + kk / 8u, B_STRIDE, true);
#else
              coopMatLoadNV(fb[j], Bs, bo + kk * B_STRIDE + (wn * WTN + j * 8u) / 8u, B_STRIDE, false);
#endif
            }
            [[unroll]] for (uint i = 0u; i < TM; ++i) [[unroll]] for (uint j = 0u; j < TN; ++j)
              acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
          }
#endif
        }
