# Sourced by the scripts that pack binaries for the GPU machine, whose image has its own glibc and
# libstdc++ but not the Debian libraries Eventide links.
# copy_carried_libs BINARY DIR: copies into DIR every shared library BINARY loads that the C
# runtime does not bring.
copy_carried_libs() {
  ldd "$1" | awk '$3 ~ /^\// {print $3}' |
    { grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so' || true; } |
    while read -r lib; do cp -Lu "$lib" "$2/"; done
}
