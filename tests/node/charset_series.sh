# Phantom CT series whose patient and description strings are non-ASCII in a declared character
# set (issue 35 item 1), for the end-to-end tests of the CLI and the node. Sourced; needs $VOXSEG
# and DCMTK's dcmodify. The strings are those of tools/make_charset_corpus.py (PS3.5 H.3.1 for
# Japanese); the phantom gives the model something to find, so SEG and RTSTRUCT are written.

# charset_series KIND FOLDER SEED: KIND latin1 (ISO_IR 100, "Schädel nativ") or jis
# (\ISO 2022 IR 87, "Yamada^Tarou=山田^太郎=やまだ^たろう" with escape sequences).
charset_series() {
  local kind=$1 folder=$2 seed=$3 tmp="$2.phantom" charset pn study series
  "$VOXSEG" phantom "$tmp" --seed "$seed" --size 64x64x24 --spacing 6x6x6 --outputs dicom \
    >/dev/null 2>&1 || { echo "voxseg phantom failed" >&2; return 1; }
  mv "$tmp/dicom" "$folder" && rm -rf "$tmp"
  case "$kind" in
    latin1)
      charset="ISO_IR 100"
      pn=$'M\xfcller^J\xfcrgen'; study=$'Sch\xe4del'; series=$'Sch\xe4del nativ' ;;
    jis)
      charset='\ISO 2022 IR 87'
      pn=$'Yamada^Tarou=\e$B;3ED\e(B^\e$BB@O:\e(B=\e$B$d$^$@\e(B^\e$B$?$m$&\e(B'
      study=$'\e$BF,It\e(B'; series=$'\e$B6;It\e(B CT' ;;
    *) echo "charset_series: unknown kind $kind" >&2; return 1 ;;
  esac
  dcmodify -nb -i "(0008,0005)=$charset" -i "(0010,0010)=$pn" -i "(0008,1030)=$study" \
    -i "(0008,103e)=$series" "$folder"/* >/dev/null 2>&1 ||
    { echo "dcmodify failed on $folder" >&2; return 1; }
}

# What a correct reader shows for charset_series KIND: PatientName, StudyDescription,
# SeriesDescription (UTF-8), one per line.
charset_expected() {
  case "$1" in
    latin1) printf '%s\n' 'Müller^Jürgen' 'Schädel' 'Schädel nativ' ;;
    jis) printf '%s\n' 'Yamada^Tarou=山田^太郎=やまだ^たろう' '頭部' '胸部 CT' ;;
  esac
}
