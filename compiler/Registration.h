//===- Registration.h - Dialects the fa compiler works with --------*- C++ -*-===//
#ifndef FA_COMPILER_REGISTRATION_H
#define FA_COMPILER_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::fa {

/// Registers the fa dialect and every dialect, interface model and LLVM IR
/// translation that the fa pipelines produce or need (bufferization models
/// for the CPU lowering included). Tools and the JIT call this one function.
void registerCompilerDialects(DialectRegistry &registry);

/// Registers the fa passes and the named fa pipelines.
void registerCompilerPasses();

} // namespace mlir::fa

#endif // FA_COMPILER_REGISTRATION_H
